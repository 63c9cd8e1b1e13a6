/* chat_fold.c - chat turns without their scaffolding (chat_fold.h): the tokens split at
 * control tokens into segments, each read as a role header, a turn or running text. */
#include "chat_fold.h"

#include <stdio.h>
#include <string.h>

static const char *const roles[] = {"system", "user", "assistant", "model", "developer", "tool"};

/* The role word that text starts with, followed by a newline (ChatML, Gemma) or alone
 * (Llama 3's header); its index in roles, -1 for none. *len: its length. */
static int role_at(const char *text, bool alone, size_t *len) {
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
        size_t n = strlen(roles[i]);
        if (!strncmp(text, roles[i], n) && (alone ? text[n] == '\0' : text[n] == '\n')) {
            *len = n + !alone;
            return (int)i;
        }
    }
    return -1;
}

/* What the segments add up to. */
typedef struct turns {
    char *out;
    size_t cap, len;
    char system[256]; /* the system turn's start, shown when nothing else is */
    bool headers;     /* a role header was seen */
    int header_role;  /* Llama 3: the role its header named, for the segment after it */
} turns;

/* Adds one segment's text: a role header (Llama 3's, after a start-header token), a turn
 * that starts with its role word, or text that goes on in the turn open before it. */
static void add_segment(turns *t, const char *seg, bool after_header) {
    size_t skip = 0;
    int role = role_at(seg, after_header, &skip);
    if (after_header && role >= 0) {
        t->header_role = role;
        t->headers = true;
        return;
    }
    if (role >= 0) t->headers = true;
    else role = t->header_role, skip = 0;
    t->header_role = -1;
    seg += skip;
    while (*seg == '\n') seg++;
    size_t n = strlen(seg);
    while (n > 0 && (seg[n - 1] == '\n' || seg[n - 1] == ' ')) n--;
    if (n == 0) return;
    if (role == 0) {
        snprintf(t->system, sizeof t->system, "system: %.*s", (int)n, seg);
        return;
    }
    int w = snprintf(t->out + t->len, t->cap - t->len, "%s%.*s", t->len ? " | " : "", (int)n, seg);
    if (w > 0) t->len += (size_t)w < t->cap - t->len ? (size_t)w : t->cap - t->len - 1;
}

bool ui_chat_fold(const tok *tk, const int32_t *ids, int32_t n, char *out, size_t cap) {
    turns t = {.out = out, .cap = cap, .header_role = -1};
    out[0] = '\0';
    char seg[1024], piece[256];
    size_t len = 0;
    bool header = false;
    tok_stream s;
    tok_stream_init(&s);
    for (int32_t i = 0; i <= n; i++) {
        bool control = i == n || tok_type(tk, ids[i]) == TOK_CONTROL;
        if (!control) {
            size_t got = tok_stream_put(tk, &s, ids[i], piece, sizeof piece);
            if (got < sizeof piece && len + got < sizeof seg) memcpy(seg + len, piece, got), len += got;
            continue;
        }
        seg[len] = '\0';
        add_segment(&t, seg, header);
        len = 0;
        const char *pc = i < n ? tok_piece(tk, ids[i]) : NULL;
        header = pc && strstr(pc, "start_header");
    }
    if (!t.headers) return false;
    if (t.len == 0) snprintf(out, cap, "%s", t.system);
    return true;
}
