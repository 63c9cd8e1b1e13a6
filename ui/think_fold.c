/* think_fold.c - thinking sections folded to a mark (think_fold.h). */
#include "think_fold.h"

#include <string.h>

/* The markers that open and close a section, one pair a family, and the scaffolding
 * that follows a close before the answer (skipped with it). */
static const struct { const char *open, *close, *then; } sections[] = {
    {"<think>", "</think>", ""},
    {"<|channel|>analysis<|message|>", "<|end|>", "<|start|>assistant<|channel|>final<|message|>"},
};

/* The first section opening at or after s: its start, and in *k its pair; NULL for none. */
static const char *next_open(const char *s, size_t *k) {
    const char *best = NULL;
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
        const char *p = strstr(s, sections[i].open);
        if (p && (!best || p < best)) best = p, *k = i;
    }
    return best;
}

/* Appends n bytes of s to out at *len (kept NUL-terminated, cut at cap - 1). */
static void put(char *out, size_t cap, size_t *len, const char *s, size_t n) {
    if (*len + n > cap - 1) n = cap - 1 - *len;
    memcpy(out + *len, s, n);
    *len += n;
    out[*len] = '\0';
}

int ui_think_opens(const char *text) {
    size_t k;
    return next_open(text, &k) ? (int)k : -1;
}

bool ui_think_closes(const char *text, int k, const char **close) {
    *close = sections[k].close;
    return strstr(text, sections[k].close) != NULL;
}

const char *ui_think_mark(bool closed, bool utf8) {
    return closed ? (utf8 ? "\xe2\x9f\xa8thought\xe2\x9f\xa9" : "[thought]")
                  : (utf8 ? "\xe2\x9f\xa8thinking\xe2\x80\xa6\xe2\x9f\xa9" : "[thinking...]");
}

/* Puts the mark of section k whose text starts at body, then skips its close and the
 * scaffolding after it; returns where the text goes on, NULL when the section is still
 * open at the end. */
static const char *put_section(const char *body, size_t k, bool utf8, char *out, size_t cap, size_t *len) {
    const char *end = strstr(body, sections[k].close);
    const char *mark = ui_think_mark(end != NULL, utf8);
    put(out, cap, len, mark, strlen(mark));
    if (!end) return NULL;
    const char *s = end + strlen(sections[k].close);
    if (!strncmp(s, sections[k].then, strlen(sections[k].then))) s += strlen(sections[k].then);
    while (*s == '\n') s++;
    put(out, cap, len, " ", 1);
    return s;
}

int ui_think_open_after(const char *text, int open) {
    size_t k = open >= 0 ? (size_t)open : 0;
    for (const char *s = text;;) {
        if (open >= 0) {
            const char *end = strstr(s, sections[k].close);
            if (!end) return (int)k;
            s = end + strlen(sections[k].close);
        }
        const char *p = next_open(s, &k);
        if (!p) return -1;
        s = p + strlen(sections[k].open);
        open = (int)k;
    }
}

bool ui_think_fold_in(const char *text, int open, bool utf8, char *out, size_t cap) {
    size_t len = 0, k = 0;
    out[0] = '\0';
    const char *s = text;
    if (open >= 0 && !(s = put_section(text, (size_t)open, utf8, out, cap, &len))) return true;
    bool folded = open >= 0;
    for (const char *p; (p = next_open(s, &k)) != NULL; folded = true) {
        put(out, cap, &len, s, (size_t)(p - s));
        if (!(s = put_section(p + strlen(sections[k].open), k, utf8, out, cap, &len))) return true;
    }
    if (folded) put(out, cap, &len, s, strlen(s));
    return folded;
}

bool ui_think_fold(const char *text, bool utf8, char *out, size_t cap) {
    return ui_think_fold_in(text, -1, utf8, out, cap);
}
