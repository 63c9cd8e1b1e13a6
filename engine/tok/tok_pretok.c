/* tok_pretok.c - the pre-tokenizers of byte-level BPE ("gpt2") vocabularies: the regular
 * expressions that cut text into words before BPE runs on each word, written out by hand
 * as scanners over code points (no regex library). Each scanner returns where the match
 * that starts at a position ends; the matches tile the text, as the regexes do (every
 * character is a letter, a number, white space or other, and each has an alternative).
 * The splits, named by tokenizer.ggml.pre:
 *   gpt2   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   llama3 (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   qwen2  as llama3 with \p{N} (one digit a word)
 *   qwen35 as qwen2 with marks (\p{M}) as letters: [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+ and
 *           ?[^\s\p{L}\p{M}\p{N}]+ (Qwen3.5 keeps combining marks inside words)
 *   smollm every \p{N} character alone, then gpt2 on the text between (Hugging Face's
 *          Digits(individual_digits) + ByteLevel, llama.cpp's "\p{N}" + gpt2 regex)
 * Classes come from engine/tok/unicode_tables.h; bytes that are not well-formed UTF-8 count
 * one by one as "other". BPE itself is in tok_bpe.c. */
#include "tok/tok_impl.h"

#include <string.h>

#include "tok/unicode_tables.h"

enum { UNI_OTHER = 0, UNI_LETTER = 1, UNI_NUMBER = 2, UNI_SPACE = 3, UNI_MARK = 4 };

static const struct { const char *name; int kind; } tok_pre_names[] = {
    { "default", TOK_PRE_GPT2 },     { "gpt2", TOK_PRE_GPT2 },      { "gpt-2", TOK_PRE_GPT2 },
    { "llama3", TOK_PRE_LLAMA3 },    { "llama-v3", TOK_PRE_LLAMA3 },
    { "llama-bpe", TOK_PRE_LLAMA3 }, { "falcon3", TOK_PRE_LLAMA3 }, { "pixtral", TOK_PRE_LLAMA3 },
    { "qwen2", TOK_PRE_QWEN2 },      { "deepseek-r1-qwen", TOK_PRE_QWEN2 },
    { "qwen35", TOK_PRE_QWEN35 },
    { "smollm", TOK_PRE_SMOLLM },    { "starcoder", TOK_PRE_SMOLLM },
};

int tok_pre_kind(const char *name) {
    if (!name || !*name) return TOK_PRE_GPT2;
    for (size_t i = 0; i < sizeof tok_pre_names / sizeof tok_pre_names[0]; i++)
        if (strcmp(name, tok_pre_names[i].name) == 0) return tok_pre_names[i].kind;
    return -1;
}

/* Class of code point c: one binary search over the runs (ASCII answered directly). */
static int uni_class(uint32_t c) {
    if (c < 0x80) {
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return UNI_LETTER;
        if (c >= '0' && c <= '9') return UNI_NUMBER;
        return c == ' ' || (c >= 0x09 && c <= 0x0D) ? UNI_SPACE : UNI_OTHER;
    }
    size_t lo = 0, hi = UNI_N_RUNS; /* the last run starting at or before c */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if ((uni_runs[mid] >> 3) <= c) lo = mid;
        else hi = mid;
    }
    return (int)(uni_runs[lo] & 7);
}

/* One character of the text: its byte length, code point and class. */
typedef struct uni_ch {
    uint32_t n, cp;
    int cls;
} uni_ch;

uint32_t tok_utf8_decode(const char *s, size_t n, uint32_t *cp) {
    const uint8_t *p = (const uint8_t *)s;
    uint8_t c = p[0];
    uint32_t len = c < 0x80 ? 1 : c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    uint32_t v = len == 1 ? c : c & (0x7F >> len);
    for (uint32_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (p[i] & 0x3F);
    }
    if ((len == 3 && (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF))) ||
        (len == 4 && (v < 0x10000 || v > 0x10FFFF)))
        return 0;
    *cp = v;
    return len;
}

/* The character at s[0..n) (n > 0); ill-formed UTF-8 is one byte of class other, with an
 * impossible code point. A mark is a letter (marks_letters) or other. */
static uni_ch uni_at(const char *s, size_t n, bool marks_letters) {
    uint32_t cp, len = tok_utf8_decode(s, n, &cp);
    if (len == 0) return (uni_ch){ 1, 0xFFFFFFFFu, UNI_OTHER };
    int cls = uni_class(cp);
    if (cls == UNI_MARK) cls = marks_letters ? UNI_LETTER : UNI_OTHER;
    return (uni_ch){ len, cp, cls };
}

/* The scanners work on s[0..end) from position i; end is where the current piece stops
 * (text end, or the next number for smollm), which the regex sees as end of text. */
typedef struct pre_text {
    const char *s;
    size_t end;
    bool marks_letters;  /* qwen35 */
} pre_text;

static uni_ch pre_ch(const pre_text *x, size_t i) {
    return i < x->end ? uni_at(x->s + i, x->end - i, x->marks_letters) : (uni_ch){ 0, 0, -1 };
}

/* End of the run of characters of class cls from i (at most max characters). */
static size_t pre_run(const pre_text *x, size_t i, int cls, int max) {
    for (int k = 0; k < max; k++) {
        uni_ch c = pre_ch(x, i);
        if (c.cls != cls) break;
        i += c.n;
    }
    return i;
}

static bool pre_is_nl(uni_ch c) { return c.cp == '\r' || c.cp == '\n'; }

/* 's 't 're 've 'm 'll 'd at i: the match end, or 0. fold: ASCII case-insensitive. */
static size_t pre_contraction(const pre_text *x, size_t i, bool fold) {
    if (x->s[i] != '\'' || i + 1 >= x->end) return 0;
    char a = x->s[i + 1], b = i + 2 < x->end ? x->s[i + 2] : 0;
    if (fold) {
        a = (char)(a >= 'A' && a <= 'Z' ? a + 32 : a);
        b = (char)(b >= 'A' && b <= 'Z' ? b + 32 : b);
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
}

/* \s+(?!\S)|\s+ at i (a white-space character): the whole run when it ends the text or
 * is one character; otherwise all but its last character, which then leads the next word. */
static size_t pre_space(const pre_text *x, size_t i) {
    size_t last = i, j = i;
    while (j < x->end) {
        uni_ch c = pre_ch(x, j);
        if (c.cls != UNI_SPACE) break;
        last = j;
        j += c.n;
    }
    return j == x->end || last == i ? j : last;
}

static size_t pre_gpt2(const pre_text *x, size_t i) {
    size_t m = pre_contraction(x, i, false);
    if (m) return m;
    uni_ch c = pre_ch(x, i);
    size_t at = i;
    if (c.cp == ' ') { /* " ?" joins the space to a following non-space word */
        uni_ch d = pre_ch(x, i + 1);
        if (d.cls >= 0 && d.cls != UNI_SPACE) {
            at = i + 1;
            c = d;
        }
    }
    if (c.cls == UNI_SPACE) return pre_space(x, i);
    return pre_run(x, at, c.cls, 1 << 30);
}

/* llama3 (digits = 3) and qwen2 (digits = 1). */
static size_t pre_llama3(const pre_text *x, size_t i, int digits) {
    size_t m = pre_contraction(x, i, true);
    if (m) return m;
    uni_ch c = pre_ch(x, i);
    if (c.cls == UNI_LETTER) return pre_run(x, i, UNI_LETTER, 1 << 30);
    if (c.cls == UNI_NUMBER) return pre_run(x, i, UNI_NUMBER, digits);
    /* [^\r\n\p{L}\p{N}]?\p{L}+ : one leading character of any other kind, then letters */
    uni_ch d = pre_ch(x, i + c.n);
    if (!pre_is_nl(c) && d.cls == UNI_LETTER) return pre_run(x, i + c.n, UNI_LETTER, 1 << 30);
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    size_t at = c.cp == ' ' && d.cls == UNI_OTHER ? i + 1 : i;
    if (pre_ch(x, at).cls == UNI_OTHER) {
        size_t j = pre_run(x, at, UNI_OTHER, 1 << 30);
        for (uni_ch e = pre_ch(x, j); e.cls >= 0 && pre_is_nl(e); e = pre_ch(x, j)) j += e.n;
        return j;
    }
    /* \s*[\r\n]+ : white space up to and including its last newline */
    size_t j = i, nl = 0;
    for (uni_ch e = pre_ch(x, j); e.cls == UNI_SPACE; e = pre_ch(x, j)) {
        j += e.n;
        if (pre_is_nl(e)) nl = j;
    }
    return nl ? nl : pre_space(x, i);
}

void tok_pre_init(tok_pre *p, int kind, const char *text, size_t len) {
    *p = (tok_pre){ kind, text, len, 0, 0 };
}

bool tok_pre_next(tok_pre *p, size_t *off, size_t *n) {
    if (p->pos >= p->len) return false;
    pre_text x = { p->s, p->len, p->kind == TOK_PRE_QWEN35 };
    size_t i = p->pos, end;
    switch (p->kind) {
    case TOK_PRE_LINES: /* llama.cpp's gemma4 split "[^\n]+|[\n]+" */
        for (end = i + 1; end < p->len && (p->s[end] == '\n') == (p->s[i] == '\n');) end++;
        break;
    case TOK_PRE_LLAMA3: end = pre_llama3(&x, i, 3); break;
    case TOK_PRE_QWEN2:
    case TOK_PRE_QWEN35: end = pre_llama3(&x, i, 1); break;
    case TOK_PRE_SMOLLM: {
        uni_ch c = pre_ch(&x, i);
        if (c.cls == UNI_NUMBER) {
            end = i + c.n;
            break;
        }
        if (p->lim <= i) { /* the stretch up to the next number, found once per stretch */
            size_t j = i;
            for (uni_ch e = c; j < p->len && e.cls != UNI_NUMBER; e = pre_ch(&x, j)) j += e.n;
            p->lim = j;
        }
        x.end = p->lim;
        end = pre_gpt2(&x, i);
        break;
    }
    default: end = pre_gpt2(&x, i); break;
    }
    *off = i;
    *n = end - i;
    p->pos = end;
    return true;
}
