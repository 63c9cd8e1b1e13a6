/* fuzz_chat.c - fuzz harness for the chat template renderer (engine/tok/chat.h).
 *
 * Input: one flags byte, then NUL-separated fields: a template text (given to chat_detect
 * and chat_default_system, and used as the default system message), then role, content,
 * role, content... A one-byte role picks "system", "user" or "assistant"; a longer one is
 * used as it is. Every renderer must agree with itself: the length it returns is the
 * length it writes, and a short buffer gets a prefix of the full text. */
#include "fuzz.h"

#include <stdbool.h>

#include "tok/chat.h"

#define FUZZ_MAX_INPUT (1 << 16)
#define FUZZ_MAX_MSGS 64

/* Renders with cap 0, then in full, then cut at cap_cut; checks they agree. */
typedef size_t (*render_fn)(const void *args, char *out, size_t cap);

static void check_render(render_fn fn, const void *args, size_t cap_cut) {
    size_t need = fn(args, NULL, 0);
    char *full = malloc(need + 1);
    if (!full) return;
    FUZZ_ASSERT(fn(args, full, need + 1) == need && strlen(full) == need);
    size_t cap = cap_cut % (need + 2) + 1; /* 1 .. need + 2 */
    char *cut = malloc(cap);
    if (cut) {
        FUZZ_ASSERT(fn(args, cut, cap) == need);
        size_t n = need < cap ? need : cap - 1;
        FUZZ_ASSERT(strlen(cut) == n && memcmp(cut, full, n) == 0);
    }
    free(cut);
    free(full);
}

typedef struct chat_args {
    chat_kind kind;
    const char *default_system;
    const chat_msg *msgs;
    size_t n;
    bool gen, first;
} chat_args;

static size_t r_apply(const void *p, char *out, size_t cap) {
    const chat_args *a = p;
    return chat_apply_with_default(a->kind, a->default_system, a->msgs, a->n, a->gen, out, cap);
}

static size_t r_user_turn(const void *p, char *out, size_t cap) {
    const chat_args *a = p;
    return chat_user_turn(a->kind, a->default_system, a->n ? a->msgs[a->n - 1].content : NULL,
                          a->first, out, cap);
}

static size_t r_default_system(const void *p, char *out, size_t cap) {
    return chat_default_system(((const chat_args *)p)->default_system, out, cap);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > FUZZ_MAX_INPUT) return 0;
    uint8_t flags = data[0];
    char *text = fuzz_strndup(data + 1, size - 1);
    if (!text) return 0;
    static const char *const roles[] = {"system", "user", "assistant"};
    chat_msg msgs[FUZZ_MAX_MSGS];
    size_t n = 0;
    const char *end = text + size - 1, *jinja = text;
    for (const char *p = text + strlen(text) + 1; p <= end && n < FUZZ_MAX_MSGS;) {
        const char *role = p;
        p += strlen(p) + 1;
        const char *content = p <= end ? p : NULL;
        if (content) p += strlen(p) + 1;
        msgs[n].role = strlen(role) == 1 ? roles[(uint8_t)role[0] % 3] : role;
        msgs[n++].content = content;
    }
    chat_kind detected = chat_detect(jinja);
    FUZZ_ASSERT((int)detected >= CHAT_NONE && (int)detected < CHAT_N_KINDS);
    for (int k = CHAT_NONE; k < CHAT_N_KINDS; k++)
        FUZZ_ASSERT((int)chat_from_name(chat_name((chat_kind)k)) == k);
    chat_args a = {.kind = (chat_kind)(flags % (CHAT_N_KINDS + 1)), /* one past: "none" */
                   .default_system = flags & 0x80 ? jinja : NULL, .msgs = msgs, .n = n,
                   .gen = flags & 0x40, .first = flags & 0x20};
    size_t cut = size * 7 + flags;
    check_render(r_apply, &a, cut);
    check_render(r_user_turn, &a, cut);
    a.default_system = jinja;
    check_render(r_default_system, &a, cut);
    free(text);
    return 0;
}
