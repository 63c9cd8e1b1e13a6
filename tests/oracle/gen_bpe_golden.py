#!/usr/bin/env python3
"""gen_bpe_golden.py - writes tests/golden/bpe_*.txt: a few hundred varied strings and the
token ids that Hugging Face `tokenizers` (a byte-level BPE nobody here wrote) gives them,
for tests/test_tok_bpe.c to compare engine/tok/tok_bpe.c and engine/tok/tok_pretok.c against.

The HF tokenizer is built from the GGUF file's own vocabulary (tokenizer.ggml.tokens) and
merges (tokenizer.ggml.merges), read with gguf-py, with the pre-tokenizer that each name
of tokenizer.ggml.pre stands for:
  smollm  Digits(individual_digits) + ByteLevel(regex)   (SmolLM2's own tokenizer.json)
  gpt2    ByteLevel(regex)                               (GPT-2's)
  llama3  Split(Llama-3 regex) + ByteLevel, ignore_merges (Llama-3's)
  qwen2   Split(Qwen2 regex) + ByteLevel                  (Qwen2's)
One golden per name, all on SmolLM2's vocabulary: only bpe_smollm2.txt is the real
tokenizer of the model; the others test the split functions with a vocabulary at hand.
CONTROL and USER_DEFINED tokens are added as HF added tokens (special for CONTROL).

Line format (UTF-8):
  # comment
  MODE<TAB>TEXT<TAB>IDS
MODE is S (parse_special: special tokens in the text are matched) or P (they are not:
HF's encode_special_tokens). TEXT escapes \\ \\t \\n \\r and other bytes below 0x20 or 0x7F
as \\xHH; IDS are decimal, space-separated (empty for no tokens).

Usage (from the repository root, with `pip install tokenizers gguf`):
    python3 tests/oracle/gen_bpe_golden.py [models/SmolLM2-135M-Instruct.Q4_1.gguf]
"""
import datetime
import random
import sys
from importlib.metadata import version as pkg_version

import gguf
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

SEED = 20250102

LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
            r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

PRES = {
    "smollm": ("bpe_smollm2.txt", False,
               lambda: pre_tokenizers.Sequence([
                   pre_tokenizers.Digits(individual_digits=True),
                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])),
    "gpt2": ("bpe_smollm2_gpt2.txt", False,
             lambda: pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)),
    "llama3": ("bpe_smollm2_llama3.txt", True,
               lambda: pre_tokenizers.Sequence([
                   pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])),
    "qwen2": ("bpe_smollm2_qwen2.txt", False,
              lambda: pre_tokenizers.Sequence([
                  pre_tokenizers.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
                  pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])),
}

# Hand-picked cases: each names a rule of some split.
FIXED = [
    "", " ", "  ", "\n", "\t", "a", "Hello world", "Hello, world!", " Hello", "Hello ",
    "Hello  world", "Hello   world   ", "  leading and trailing  ",
    "I'm don't WE'LL they're you've she'd it's O'Neil 'tis rock'n'roll",
    "I'M DON'T YOU'RE THEY'VE HE'D IT'S", "''s '''", "x's", "'s", "'", "'ll've",
    "123", "1234567", "3.14159", "1,000,000", "2024-01-15", "v1.2.3", "0x1F", "abc123def",
    " 42", "  42", "a 1 b 22 c 333 d 4444", "12345678901234567890", "1e-10", "-7", "+7",
    "¹²³ ½ ¾ Ⅻ ٣٤٥ ४५६ 〇", "x² + y² = z²",
    "line1\nline2\n\nline4\n\n\n", "crlf\r\nline\r\n", "\r\n\r\n", " \n \n ", "\n\n  \n\t",
    "tabs\tand\t\ttabs", "\t\tindented", "a \t b", "end with newline\n", "   \n",
    "def f(x):\n    return x * 2\n\n\nclass A:\n\tpass\n",
    "if (a && b) { return c[0]->d; } // comment",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); }",
    "for i in range(10):\n        print(i)",
    "<html><body class=\"x\">&amp;</body></html>", "https://example.com/a?b=c&d=e#f",
    "user@example.com", "$100.00 €50 £30 ¥1000", "!!!???...", "---", "===",
    "(parenthesised) [bracketed] {braced}", "a/b\\c|d", "~`@#%^&*_+=",
    "Ünïcödé façade naïve café résumé", "Straße", "İstanbul ıi", "ǅungla",
    "Привет, мир! Как дела?", "Γειά σου Κόσμε", "שלום עולם", "مرحبا بالعالم ١٢٣",
    "नमस्ते दुनिया", "你好，世界！", "日本語のテキスト、カタカナ、ひらがな。", "안녕하세요 세계",
    "สวัสดีชาวโลก", "ሰላም ልዑል", "Բարեւ աշխարհ", "გამარჯობა", "Xin chào thế giới",
    "emoji 😀😃😄 🎉", "👍🏽 thumbs", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flag", "🇯🇵🇺🇸", "❤️‍🔥",
    "e\u0301 combining", "a\u0300\u0301\u0302", "zero\u200bwidth", "nbsp\u00a0here",
    "ideographic\u3000space", "soft\u00adhyphen", "\u2028line sep\u2029", "\u0085nel",
    "\x00nul\x01\x1f\x7f", "bell\x07", "\x1c\x1d\x1e\x1f!",
    "mixed English and 中文 text", "CamelCaseIdentifier snake_case_name kebab-case",
    "ALLCAPS lowercase MiXeD", "a" * 100, " " * 50, "\n" * 20, "ab" * 40, "😀" * 10,
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
    "text<|endoftext|>more", "<|im_end|><|im_end|>", "<|im_start", "|im_end|>",
    "before <|im_start|> after", "<repo_name>x<file_sep>y", "<|endoftext|>",
    " <|im_end|> ", "\n<|im_start|>\n",
]

SAMPLES = [
    "the", " the", "quick", " brown", "fox", "jumps", "over", "lazy", "dog", ",", ".", "!",
    "?", ";", ":", "'", "\"", "'s", "'re", "n't", " ", "  ", "   ", "\t", "\n", "\r\n",
    "\n\n", "0", "7", "42", "123", "2024", "3.5", "1,234", "(", ")", "[", "]", "{", "}",
    "<", ">", "=", "==", "->", "=>", "#", "//", "/*", "*/", "+", "-", "*", "/", "%", "_",
    "é", "ü", "ß", "ñ", "Ж", "я", "λ", "Ω", "א", "ب", "ह", "中", "文", "の", "カ", "한",
    "ก", "😀", "🎉", "👍🏽", "👨‍👩‍👧", "\u200d", "\u00a0", "\u3000", "²", "½", "٣",
    "Hello", "WORLD", "CamelCase", "snake_case", "x1", "v2", "def", "return", "int", "void",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<file_sep>",
]


def escape(s):
    out = []
    for ch in s:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif o < 0x20 or o == 0x7F:
            out.append("\\x%02x" % o)
        else:
            out.append(ch)
    return "".join(out)


def cases():
    rng = random.Random(SEED)
    out = list(FIXED)
    for _ in range(250):
        n = rng.randint(1, 14)
        out.append("".join(rng.choice(SAMPLES) for _ in range(n)))
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "models/SmolLM2-135M-Instruct.Q4_1.gguf"
    r = gguf.GGUFReader(path)
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    merges = r.fields["tokenizer.ggml.merges"].contents()
    file_pre = r.fields["tokenizer.ggml.pre"].contents()
    vocab = {}
    for i, t in enumerate(tokens):
        vocab[t] = i  # a piece listed twice: the later id, as engine/tok/tok.c does
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    strings = cases()
    today = datetime.date.today().isoformat()
    for pre, (fname, ignore_merges, make_pre) in PRES.items():
        tk = Tokenizer(models.BPE(vocab=vocab, merges=pairs, ignore_merges=ignore_merges))
        tk.pre_tokenizer = make_pre()
        tk.decoder = decoders.ByteLevel()
        tk.add_tokens([AddedToken(t, special=(ty == 3), normalized=False)
                       for t, ty in zip(tokens, types) if ty in (3, 4)])
        lines = [
            "# %s - byte-level BPE goldens from Hugging Face tokenizers %s (gguf %s, python %s)"
            % (fname, pkg_version("tokenizers"), pkg_version("gguf"), sys.version.split()[0]),
            "# vocabulary and merges: %s (its tokenizer.ggml.pre is %s)" % (path.split("/")[-1], file_pre),
            "# pre-tokenizer: %s%s" % (pre, ", ignore_merges" if ignore_merges else ""),
            "# generated: %s by python3 tests/oracle/gen_bpe_golden.py (seed %d)" % (today, SEED),
            "# format: MODE<TAB>TEXT<TAB>IDS; MODE S = parse_special, P = not; see the script",
            "pre\t%s" % pre,
        ]
        for s in strings:
            for mode in ("S", "P"):
                if mode == "P" and "<" not in s:
                    continue
                tk.encode_special_tokens = mode == "P"
                ids = tk.encode(s, add_special_tokens=False).ids
                if mode == "S" and "\x1d" not in s:  # no token spells \x1d in SmolLM2
                    assert tk.decode(ids, skip_special_tokens=False) == s, repr(s)
                lines.append("%s\t%s\t%s" % (mode, escape(s), " ".join(map(str, ids))))
        with open("tests/golden/" + fname, "w", encoding="utf-8", newline="\n") as f:
            f.write("\n".join(lines) + "\n")
        print("wrote tests/golden/%s (%d cases)" % (fname, len(lines) - 6), file=sys.stderr)


if __name__ == "__main__":
    main()
