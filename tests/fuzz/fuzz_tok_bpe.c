/* fuzz_tok_bpe.c - fuzz harness for the byte-level BPE ("gpt2") tokenizer and its
 * pre-tokenizers: every input (a flags byte, then text; see fuzz_tok.h) is encoded and
 * decoded by a hand-made vocabulary under each pre-tokenizer (gpt2, llama3, qwen2,
 * smollm), and by SmolLM2's vocabulary when models/ (or the shared fixtures) has it. */
#include "fuzz_tok.h"

/* GPT-2's byte-to-unicode table: printable Latin-1 bytes keep their code point, the
 * others take 256, 257, ... in order; written as UTF-8 (at most 2 bytes). */
static void byte_char(int b, char out[3]) {
    int cp = b, next = 256;
    for (int i = 0; i < b; i++) {
        bool keep = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE;
        next += !keep;
    }
    if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) cp = next;
    if (cp < 0x80) {
        out[0] = (char)cp, out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
    }
}

/* Merges (rank order) and the pieces they make; "\xc4\xa0" is the space's character,
 * "\xc4\x8a" the newline's, "\xc3\x83 \xc2\xa9" the bytes of U+00E9. */
static const char *const bpe_merges[] = {
    "\xc4\xa0 t", "h e", "\xc4\xa0t he", "a b", "ab c", "\xc4\xa0 \xc4\xa0", "\xc4\x8a \xc4\x8a",
    "1 2", "\xc3\x83 \xc2\xa9", "\xc4\xa0 a",
};
static const char *const bpe_more[] = {
    "\xc4\xa0t", "he", "\xc4\xa0the", "ab", "abc", "\xc4\xa0\xc4\xa0", "\xc4\x8a\xc4\x8a",
    "12", "\xc3\x83\xc2\xa9", "\xc4\xa0\x61" /* Ġa */, "<|endoftext|>", "<|im_start|>", "<u>",
};
#define N_MERGES (int32_t)(sizeof bpe_merges / sizeof bpe_merges[0])
#define N_MORE (sizeof bpe_more / sizeof bpe_more[0])

static tok *bpe_toy(const char *pre) {
    enum { N = 256 + N_MORE };
    static char bytes[256][3];
    const char *pieces[N];
    int32_t types[N];
    for (int b = 0; b < 256; b++) {
        byte_char(b, bytes[b]);
        pieces[b] = bytes[b];
        types[b] = TOK_NORMAL;
    }
    for (size_t i = 0; i < N_MORE; i++) {
        pieces[256 + i] = bpe_more[i];
        types[256 + i] = TOK_NORMAL;
    }
    types[N - 3] = TOK_CONTROL, types[N - 2] = TOK_CONTROL, types[N - 1] = TOK_USER;
    tok_vocab_desc d = tok_vocab_desc_default();
    d.model = "gpt2";
    d.n_vocab = N;
    d.pieces = pieces;
    d.types = types;
    d.merges = bpe_merges;
    d.n_merges = N_MERGES;
    d.pre = pre;
    d.add_bos = false;
    d.bos = d.eos = N - 3;
    st_err err = {0};
    tok *t = tok_from_vocab(&d, &err);
    if (!t) {
        fprintf(stderr, "fuzz_tok_bpe: the hand-made vocabulary (%s): %s\n", pre, err.msg);
        abort();
    }
    return t;
}

static tok *bpe_smollm2(void) {
    static const char rel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    return fuzz_tok_gguf("fuzz_tok_bpe", access(rel, R_OK) == 0 ? rel : fuzz_shared(rel));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const pres[] = {"default", "llama3", "qwen2", "smollm"};
    enum { N_PRE = sizeof pres / sizeof pres[0] };
    static tok *toks[N_PRE + 1]; /* built once, kept for the process */
    static bool ready;
    if (!ready) {
        for (int i = 0; i < N_PRE; i++) toks[i] = bpe_toy(pres[i]);
        toks[N_PRE] = bpe_smollm2();
        ready = true;
    }
    for (int i = 0; i < N_PRE; i++) fuzz_tok_check(toks[i], data, size, true);
    /* SmolLM2 has no character for some bytes (0x1d): they are dropped, not lossless */
    if (toks[N_PRE]) fuzz_tok_check(toks[N_PRE], data, size, false);
    return 0;
}
