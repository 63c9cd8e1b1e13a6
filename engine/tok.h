/* tok.h - tokenizer built from a GGUF file's tokenizer.ggml.* metadata.
 *
 * Supports the GGUF tokenizer model "llama": SentencePiece-style BPE, where the pair of
 * adjacent pieces whose concatenation is in the vocabulary with the highest score is
 * merged first, with byte fallback (<0xXX> tokens) for text the vocabulary cannot spell,
 * the dummy-prefix space (tokenizer.ggml.add_space_prefix, default true) and U+2581
 * standing for a space. Special/control tokens are matched in the text only when the
 * caller asks (parse_special). Other models ("gpt2" byte-level BPE) are a clear
 * ST_ERR_UNSUPPORTED for now.
 *
 * Decoding is streaming: tok_stream_* returns only whole UTF-8 characters, holding back
 * the bytes of a character split across byte tokens until it is complete. */
#ifndef MD_TOK_H
#define MD_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

typedef struct tok tok;

/* Token types, as in tokenizer.ggml.token_type. */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5,
       TOK_BYTE = 6 };

/* Builds the tokenizer from GGUF metadata (copies what it needs; g may be closed after).
 * NULL + err: ST_ERR_NOT_FOUND when there is no tokenizer, ST_ERR_UNSUPPORTED for an
 * unknown tokenizer model, ST_ERR_FORMAT for inconsistent arrays. */
tok *tok_from_gguf(const gguf_ctx *g, st_err *err);
void tok_free(tok *t); /* NULL is a no-op */

int32_t tok_n_vocab(const tok *t);
int32_t tok_bos(const tok *t);   /* -1 when the model has none */
int32_t tok_eos(const tok *t);   /* -1 when the model has none */
bool tok_add_bos(const tok *t);  /* tokenizer.ggml.add_bos_token, default true */
const char *tok_model_name(const tok *t); /* "llama" */
/* True for tokens that end generation (EOS, and EOT where the model has one). */
bool tok_is_eog(const tok *t, int32_t id);

/* The stored piece of a token (with U+2581, as in the vocabulary), NUL-terminated;
 * NULL for an id out of range. Valid while t lives. */
const char *tok_piece(const tok *t, int32_t id);
int32_t tok_type(const tok *t, int32_t id);

/* Encodes len bytes of text. Writes at most cap ids to out and returns the number of ids
 * the full encoding has (call with cap = 0 to size the buffer). add_bos prepends BOS when
 * the model has one. parse_special: text like "<s>" becomes the control token. */
int32_t tok_encode(const tok *t, const char *text, size_t len, bool add_bos, bool parse_special,
                   int32_t *out, int32_t cap);

/* Streaming detokenizer state; zero it (or call tok_stream_init) before the first token. */
typedef struct tok_stream {
    uint8_t pend[8];     /* bytes of an incomplete UTF-8 character */
    int32_t n_pend;
    int32_t prev;        /* previous token id, -1 at start */
} tok_stream;

void tok_stream_init(tok_stream *s);
/* Appends the text of token id to out (at most cap bytes, NUL-terminated when cap > 0)
 * and returns the number of bytes it produced (excluding NUL); returns the needed size
 * without writing when it does not fit. Leading space after BOS is dropped (as
 * SentencePiece does for the dummy prefix); control tokens produce no text; bytes of an
 * incomplete UTF-8 character are held until it completes; invalid UTF-8 becomes U+FFFD. */
size_t tok_stream_put(const tok *t, tok_stream *s, int32_t id, char *out, size_t cap);
/* Flushes held bytes (as U+FFFD) at the end of a stream. */
size_t tok_stream_flush(const tok *t, tok_stream *s, char *out, size_t cap);

/* Decodes a whole sequence (same rules as the stream); returns the needed size like
 * tok_encode. */
size_t tok_decode(const tok *t, const int32_t *ids, int32_t n, char *out, size_t cap);

#endif
