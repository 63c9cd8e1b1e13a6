/* tok.h - tokenizer built from a GGUF file's tokenizer.ggml.* metadata.
 *
 * Supports two GGUF tokenizer models. "llama": SentencePiece-style BPE, where the pair of
 * adjacent pieces whose concatenation is in the vocabulary with the highest score is
 * merged first, with byte fallback (<0xXX> tokens) for text the vocabulary cannot spell,
 * the dummy-prefix space (tokenizer.ggml.add_space_prefix, default true) and U+2581
 * standing for a space. "gpt2": byte-level BPE, where every byte is spelled by one
 * printable character (GPT-2's byte-to-unicode table), the text is first cut into words
 * by the pre-tokenizer named in tokenizer.ggml.pre (gpt2/default, llama3, qwen2, smollm
 * and their aliases) and the merges of tokenizer.ggml.merges are applied in rank order
 * within each word. Special/control tokens are matched in the text only when the caller
 * asks (parse_special). Other models are a clear ST_ERR_UNSUPPORTED.
 *
 * Decoding is streaming: tok_stream_* returns only whole UTF-8 characters, holding back
 * the bytes of a character split across byte tokens until it is complete. */
#ifndef MD_TOK_H
#define MD_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

typedef struct tok tok;

/* Token types, as in tokenizer.ggml.token_type. */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5,
       TOK_BYTE = 6 };

/* Builds the tokenizer from GGUF metadata (copies what it needs; g may be closed after).
 * NULL + err: ST_ERR_NOT_FOUND when there is no tokenizer, ST_ERR_UNSUPPORTED for an
 * unknown tokenizer model or pre-tokenizer, ST_ERR_FORMAT for inconsistent arrays. For
 * "llama", absent bos / eos / unknown ids take llama.cpp's SentencePiece defaults
 * 1 / 2 / 0 (when in range); for "gpt2" they are none, and add_bos_token and
 * add_space_prefix default to false. An id of 0xFFFFFFFF means none; any other id out
 * of range is ST_ERR_FORMAT. */
tok *tok_from_gguf(const gguf_ctx *g, st_err *err);
void tok_free(tok *t); /* NULL is a no-op */

/* A vocabulary given as arrays, for building a tokenizer without a GGUF file (tests, the
 * test-model generator); tok_from_gguf reads the GGUF arrays into one of these. */
typedef struct tok_vocab_desc {
    const char *model;           /* tokenizer model name; NULL means "llama" */
    int32_t n_vocab;             /* > 0 */
    const char *const *pieces;   /* (n_vocab) pieces, U+2581 standing for a space */
    const size_t *piece_lens;    /* (n_vocab) byte lengths; NULL: pieces are NUL-terminated */
    const float *scores;         /* (n_vocab) merge priorities; NULL: all 0 */
    const int32_t *types;        /* (n_vocab) TOK_*; NULL: all TOK_NORMAL */
    int32_t bos, eos, unk, eot;  /* token ids, -1 for none */
    bool add_bos;                /* default true */
    bool add_space_prefix;       /* default true; ignored (false) for "gpt2" */
    /* "gpt2" only: */
    const char *const *merges;   /* (n_merges) "left right" piece pairs; rank = index */
    const size_t *merge_lens;    /* (n_merges) byte lengths; NULL: NUL-terminated */
    int32_t n_merges;
    const char *pre;             /* tokenizer.ggml.pre; NULL means "default" (GPT-2 regex) */
} tok_vocab_desc;

/* A descriptor with no arrays, all ids -1 and both flags true. */
tok_vocab_desc tok_vocab_desc_default(void);
/* Builds a tokenizer from arrays (everything is copied). NULL + err: ST_ERR_UNSUPPORTED
 * for a model other than "llama" or "gpt2" or an unknown pre-tokenizer, ST_ERR_ARG for a
 * missing array, an id out of range or an oversized vocabulary, ST_ERR_NOMEM. When two
 * tokens share a piece, the later id is the one encoding produces (as llama.cpp does).
 * For "gpt2", merges whose pieces (or whose concatenation) are not in the vocabulary are
 * ignored, and a pair listed twice keeps its first rank. */
tok *tok_from_vocab(const tok_vocab_desc *d, st_err *err);

int32_t tok_n_vocab(const tok *t);
int32_t tok_bos(const tok *t);   /* -1 when the model has none */
int32_t tok_eos(const tok *t);   /* -1 when the model has none */
bool tok_add_bos(const tok *t);  /* tokenizer.ggml.add_bos_token, default true */
const char *tok_model_name(const tok *t); /* "llama" or "gpt2" */
/* True for tokens that end generation: EOS, EOT where the model has one, and the
 * CONTROL/USER tokens "<|im_end|>" (ChatML) and "<|endoftext|>" where the vocabulary has
 * them (as llama.cpp's end-of-generation set does). */
bool tok_is_eog(const tok *t, int32_t id);

/* The stored piece of a token (with U+2581 or GPT-2's byte characters, as in the
 * vocabulary), NUL-terminated;
 * NULL for an id out of range. Valid while t lives. */
const char *tok_piece(const tok *t, int32_t id);
int32_t tok_type(const tok *t, int32_t id); /* -1 for an id out of range */

/* Encodes len bytes of text. Writes at most cap ids to out and returns the number of ids
 * the full encoding has (call with cap = 0 to size the buffer). add_bos prepends BOS when
 * the model has one. parse_special: text like "<s>" becomes the control token. */
int32_t tok_encode(const tok *t, const char *text, size_t len, bool add_bos, bool parse_special,
                   int32_t *out, int32_t cap);
/* tok_encode into a malloc'd array (at least one element, so it is never NULL for an
 * empty text); its count in *n. NULL with ST_ERR_NOMEM in err when memory runs out. */
int32_t *tok_encode_alloc(const tok *t, const char *text, size_t len, bool add_bos, bool parse_special,
                          int32_t *n, st_err *err);
/* Details of tok_encode, as llama.cpp's SentencePiece path does it: the dummy-prefix space
 * is added to a text segment that starts the input or follows a special token, and only
 * to non-empty text. USER-defined pieces are split out of the text even without
 * parse_special; CONTROL and UNKNOWN pieces only with it (longest pieces first). Returns
 * -1 when memory runs out or the encoding would have more than INT32_MAX ids. For "gpt2"
 * the special pieces are split out the same way, and each plain fragment is cut into
 * words by the pre-tokenizer and byte-level BPE-encoded, with no dummy prefix; for the
 * "llama3" pre-tokenizer a word that is itself a piece is taken whole (llama.cpp's and
 * Hugging Face's ignore_merges). A byte whose character is not in a "gpt2" vocabulary is
 * dropped (as Hugging Face does; its unk is usually a control token like <|endoftext|>). */

/* Streaming detokenizer state; zero it (or call tok_stream_init) before the first token. */
typedef struct tok_stream {
    uint8_t pend[8];     /* bytes of an incomplete UTF-8 character */
    int32_t n_pend;
    int32_t prev;        /* previous token id, -1 at start */
} tok_stream;

void tok_stream_init(tok_stream *s);
/* Set a stream's prev to this to decode a token as if inside running text (no dummy-
 * prefix space dropped), e.g. to show one alternative token on its own. */
#define TOK_STREAM_MIDTEXT INT32_MAX
/* Appends the text of token id to out (at most cap bytes, NUL-terminated when cap > 0)
 * and returns the number of bytes it produced (excluding NUL); returns the needed size
 * without writing when it does not fit. Leading space after BOS is dropped (as
 * SentencePiece does for the dummy prefix); control tokens produce no text; bytes of an
 * incomplete UTF-8 character are held until it completes; invalid UTF-8 becomes U+FFFD. */
size_t tok_stream_put(const tok *t, tok_stream *s, int32_t id, char *out, size_t cap);
/* Details of tok_stream_put: the token is consumed (s advances) only when its text fits,
 * that is when the return value is < cap; otherwise s is unchanged, so the call can be
 * repeated with a buffer of return value + 1 bytes. The leading space is dropped only
 * when the model adds the dummy prefix (add_space_prefix), from the first NORMAL token
 * at stream start or after a CONTROL, USER or UNKNOWN token, since encoding adds the
 * prefix exactly there (a zeroed stream has prev = 0, which in SentencePiece vocabularies
 * is <unk>, so it behaves as at stream start). USER tokens produce their piece verbatim,
 * UNKNOWN tokens U+2047 between two spaces (as SentencePiece does), UNUSED tokens and
 * ids out of range nothing. For "gpt2", NORMAL pieces are mapped back to bytes through
 * the inverse byte-to-unicode table (characters outside it pass through as they are) and
 * no space is ever dropped. */
/* Flushes held bytes (as U+FFFD) at the end of a stream; consumes like tok_stream_put. */
size_t tok_stream_flush(const tok *t, tok_stream *s, char *out, size_t cap);

/* Decodes a whole sequence (same rules as the stream); returns the needed size like
 * tok_encode. Writes at most cap - 1 bytes and a NUL when cap > 0 (cut short, like
 * snprintf, when the return value is >= cap). */
size_t tok_decode(const tok *t, const int32_t *ids, int32_t n, char *out, size_t cap);
/* tok_decode into a malloc'd NUL-terminated string (caller frees); NULL when memory runs
 * out. */
char *tok_decode_str(const tok *t, const int32_t *ids, int32_t n);

#endif
