/* tok_impl.h - private to the tokenizer: the layout of struct tok shared by tok.c
 * (construction, lookups, decoding) and tok_spm.c (SentencePiece BPE encoding). Nothing
 * outside engine/tok*.c includes this file. */
#ifndef MD_TOK_IMPL_H
#define MD_TOK_IMPL_H

#include "tok.h"

struct tok {
    char model[16];          /* "llama" */
    int32_t n_vocab;
    char *text;              /* every piece, NUL-terminated, back to back */
    uint32_t *off;           /* (n_vocab) offset of each piece in text */
    uint32_t *len;           /* (n_vocab) byte length of each piece */
    float *score;            /* (n_vocab) merge priority: higher merges first */
    int32_t *type;           /* (n_vocab) TOK_* */
    int16_t *byte_val;       /* (n_vocab) 0..255 for a well-formed <0xXX> BYTE token, else -1 */
    int32_t *map;            /* (map_mask + 1) open-addressed piece -> id hash, -1 = empty */
    uint32_t map_mask;
    int32_t byte_tok[256];   /* token that spells byte b (<0xXX>, else the 1-byte piece), or unk */
    bool lone[128];          /* ASCII bytes found in no piece of 2+ bytes: they never merge,
                              * so BPE can run on the stretches between them separately */
    int32_t *special;        /* (n_special) CONTROL/USER/UNKNOWN ids, longest piece first */
    int32_t n_special;
    int32_t bos, eos, unk, eot; /* -1 when absent */
    bool add_bos, add_space_prefix;
};

/* Id of the token whose piece is exactly s[0..n), or -1. */
int32_t tok_lookup(const tok *t, const char *s, size_t n);

#endif
