/* tok_impl.h - private to the tokenizer: the layout of struct tok shared by tok.c
 * (construction, lookups, decoding), tok_spm.c (SentencePiece BPE encoding), tok_bpe.c
 * (byte-level BPE, model "gpt2") and tok_pretok.c (its pre-tokenizer splits). Nothing
 * outside engine/tok*.c includes this file. */
#ifndef MD_TOK_IMPL_H
#define MD_TOK_IMPL_H

#include "tok/tok.h"

/* U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's stand-in for a space. */
#define TOK_SPACE_MARK "\xE2\x96\x81"

#define TOK_N_EOG 3 /* end-of-generation tokens found by their text */

struct tok {
    char model[16];          /* "llama", "gpt2" or "gemma4" */
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
    int32_t eog[TOK_N_EOG];  /* more end-of-generation tokens found by their text
                              * (<|im_end|>, <|endoftext|>, <turn|>), -1 for none */
    struct tok_bpe *bpe;     /* BPE merge data (models "gpt2" and "gemma4"), NULL for "llama" */
};

/* Id of the token whose piece is exactly s[0..n), or -1. */
int32_t tok_lookup(const tok *t, const char *s, size_t n);

/* Byte length (1..4) of the well-formed UTF-8 character at s[0..n) (n > 0), its code
 * point going to *cp; 0 when the bytes there are ill-formed (a stray continuation byte,
 * an overlong form, a surrogate, past U+10FFFF, cut short by n), in which case s[0] is
 * to be taken as a byte on its own. In tok_pretok.c. */
uint32_t tok_utf8_decode(const char *s, size_t n, uint32_t *cp);

/* ---- byte-level BPE (tok_bpe.c) ---- */

/* Sets up t->bpe from d's merges and pre-tokenizer name (t's vocabulary already built).
 * ST_ERR_UNSUPPORTED for an unknown pre-tokenizer, ST_ERR_ARG for missing merges,
 * ST_ERR_NOMEM. */
st_code tok_bpe_init(tok *t, const tok_vocab_desc *d, st_err *err);
void tok_bpe_free(struct tok_bpe *b); /* NULL is a no-op */
/* Encodes one plain fragment (no special tokens in it): ids go to out[*n] while *n < cap,
 * *n counts them all. Returns false when memory runs out. */
bool tok_bpe_fragment(const tok *t, const char *s, size_t len, int32_t *out, int64_t cap,
                      int64_t *n);
/* The byte that the character at p[0..n) (n > 0) stands for in GPT-2's byte-to-unicode
 * table, or -1 when it stands for none; *used gets its UTF-8 length (1 when ill-formed). */
int tok_bpe_char_byte(const char *p, size_t n, size_t *used);
/* True for BPE over raw UTF-8 with spaces spelled U+2581 (gemma4), whose pieces decode as
 * SentencePiece's do; false for byte-level BPE (gpt2). */
bool tok_bpe_raw(const tok *t);

/* ---- pre-tokenizer splits (tok_pretok.c) ---- */

enum { TOK_PRE_GPT2, TOK_PRE_LLAMA3, TOK_PRE_QWEN2, TOK_PRE_QWEN35, TOK_PRE_SMOLLM,
       TOK_PRE_LINES /* runs of newlines and runs of anything else (gemma4) */ };

/* The split for a tokenizer.ggml.pre name (NULL or "" is "default", the GPT-2 regex),
 * or -1 when the name is unknown. */
int tok_pre_kind(const char *name);

/* Iterator over the words of a text; the text is borrowed for the iterator's life. */
typedef struct tok_pre {
    int kind;
    const char *s;
    size_t len, pos;
    size_t lim;              /* smollm: end of the current stretch without numbers */
} tok_pre;

void tok_pre_init(tok_pre *p, int kind, const char *text, size_t len);
/* The next word as text[*off .. *off + *n) (n > 0); false at the end. */
bool tok_pre_next(tok_pre *p, size_t *off, size_t *n);

#endif
