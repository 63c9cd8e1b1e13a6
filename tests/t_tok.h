/* t_tok.h - loading a real vocabulary in a test (header-only): the tokenizer of a GGUF
 * file under this folder or among the shared fixtures, or a skip when there is none. */
#ifndef MD_T_TOK_H
#define MD_T_TOK_H

#include <unistd.h>

#include "gguf/gguf.h"
#include "tok/tok.h"
#include "t.h"

/* The tokenizer of the GGUF file rel ("models/stories260K.gguf"), read from ./rel when it
 * is there, else from the shared fixtures; NULL with a skip (absent) or a failed check.
 * The caller frees it with tok_free. */
static inline tok *t_tok_load(const char *rel) {
    const char *path = access(rel, R_OK) == 0 ? rel : t_shared(rel);
    if (!path) {
        T_MISSING("%s not found", rel);
        return NULL;
    }
    st_err err;
    gguf_ctx *g = gguf_open(path, &err);
    T_CHECK(g != NULL, "gguf_open %s: %s", rel, err.msg);
    if (!g) return NULL;
    tok *t = tok_from_gguf(g, &err);
    T_CHECK(t != NULL, "tok_from_gguf %s: %s", rel, err.msg);
    gguf_close(g);
    return t;
}

#endif
