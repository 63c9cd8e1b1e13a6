/* fuzz_tok_spm.c - fuzz harness for the SentencePiece ("llama") tokenizer: every input
 * (a flags byte, then text; see fuzz_tok.h) is encoded and decoded by a hand-made
 * vocabulary with and without the dummy-prefix space, and by the real Llama vocabulary
 * (ggml-vocab-llama-spm.gguf) when the shared fixtures are at hand. */
#include "fuzz_tok.h"

/* Pieces after <unk>, <s>, </s> and the 256 byte tokens: merges reach each longer one
 * from two shorter ones; a USER piece is split out of any text, an UNUSED one never
 * produced. U+2581 stands for a space. */
#define SP "\xe2\x96\x81"
static const struct { const char *piece; int32_t type; } spm_more[] = {
    {SP, TOK_NORMAL},       {"a", TOK_NORMAL},       {"b", TOK_NORMAL},
    {"c", TOK_NORMAL},      {SP "a", TOK_NORMAL},    {"ab", TOK_NORMAL},
    {"bc", TOK_NORMAL},     {SP "ab", TOK_NORMAL},   {"abc", TOK_NORMAL},
    {SP SP, TOK_NORMAL},    {"\xc3\xa9", TOK_NORMAL}, {SP "\xc3\xa9", TOK_NORMAL},
    {"<user>", TOK_USER},   {"<unused>", TOK_UNUSED}, {"<ctl>", TOK_CONTROL},
};
#define N_MORE (sizeof spm_more / sizeof spm_more[0])

static tok *spm_toy(bool space_prefix) {
    enum { N = 3 + 256 + N_MORE };
    static char bytes[256][8];
    const char *pieces[N];
    float scores[N];
    int32_t types[N];
    pieces[0] = "<unk>", pieces[1] = "<s>", pieces[2] = "</s>";
    types[0] = TOK_UNKNOWN, types[1] = TOK_CONTROL, types[2] = TOK_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        pieces[3 + b] = bytes[b];
        types[3 + b] = TOK_BYTE;
    }
    for (size_t i = 0; i < N_MORE; i++) {
        pieces[3 + 256 + i] = spm_more[i].piece;
        types[3 + 256 + i] = spm_more[i].type;
    }
    for (int i = 0; i < N; i++) scores[i] = -(float)i;
    tok_vocab_desc d = tok_vocab_desc_default();
    d.n_vocab = N;
    d.pieces = pieces;
    d.scores = scores;
    d.types = types;
    d.unk = 0, d.bos = 1, d.eos = 2;
    d.add_space_prefix = space_prefix;
    st_err err = {0};
    tok *t = tok_from_vocab(&d, &err);
    if (!t) {
        fprintf(stderr, "fuzz_tok_spm: the hand-made vocabulary: %s\n", err.msg);
        abort();
    }
    return t;
}

static tok *spm_llama(void) {
    return fuzz_tok_gguf("fuzz_tok_spm", fuzz_shared("models/ggml-vocab-llama-spm.gguf"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static tok *toks[3]; /* built once, kept for the process */
    if (!toks[0]) {
        toks[0] = spm_toy(true);
        toks[1] = spm_toy(false);
        toks[2] = spm_llama();
    }
    for (int i = 0; i < 3; i++)
        if (toks[i]) fuzz_tok_check(toks[i], data, size, true);
    return 0;
}
