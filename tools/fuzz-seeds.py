#!/usr/bin/env python3
"""fuzz-seeds.py - writes the fuzzers' seed corpora: build/fuzz/corpus/<harness>/.

Seeds come from the fixtures (../shared or $MD_SHARED, when present), the repository's
own files (assets/keys, the tokenizer goldens) and files the program writes itself
(`multidecode mkmodel` for small GGUF models of each weight type, `multidecode cot
--save` for session files), so no binary seed is committed. Run from the repository
root after `make`:

    python3 tools/fuzz-seeds.py [--bin ./multidecode] [--out build/fuzz/corpus]

Each harness's input format is in its tests/fuzz/fuzz_NAME.c; the tokenizer and chat
harnesses take a flags byte first. Existing corpora are kept (new seeds are added)."""
import argparse
import hashlib
import os
import subprocess
import sys
import tempfile


def shared(rel):
    root = os.environ.get("MD_SHARED", "../shared")
    path = os.path.join(root, rel)
    return path if os.access(path, os.R_OK) else None


def put(out, name, data):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


def texts():
    """Short texts for the tokenizers: the Llama vocabulary's test inputs, the BPE
    goldens' texts, a few TinyStories lines and some edge cases."""
    out = ["", " ", "  ", "Hello world", " Hello", "\n\n\t x", "<s>", "</s>", "<|im_start|>",
           "<|endoftext|>", "<user>", "abc ab a", "\xe9t\xe9 \U0001F600", "1234567 3.14",
           "I'm don't WE'LL", "\u2581a", "\xc0 ", "\x00\x01\xff"]
    p = shared("models/ggml-vocab-llama-spm.gguf.inp")
    if p:
        with open(p, encoding="utf-8", errors="replace") as f:
            out += [t.strip("\n") for t in f.read().split("__ggml_vocab_test__")]
    with open("tests/golden/bpe_smollm2.txt", encoding="utf-8") as f:
        out += [ln.split("\t")[1] for ln in f if not ln.startswith("#") and ln.count("\t") >= 2]
    p = shared("models/tinystories_val_subset.txt")
    if p:
        with open(p, encoding="utf-8", errors="replace") as f:
            out += [f.readline().strip() for _ in range(8)]
    return [t for t in out if len(t.encode("utf-8", "surrogatepass")) <= 1024]


def tok_seeds(out):
    for i, t in enumerate(texts()):
        data = bytes([i % 4]) + t.encode("utf-8", "surrogatepass")
        put(out, "tok_spm", data)
        put(out, "tok_bpe", data)


# (weight type, options over the defaults below): small enough for a fuzzer (a few to
# a few tens of KiB), the quantized ones with rows of one 32-block
MODELS = [("f32", {}), ("f32", {"--untied": None}), ("f16", {}),
          ("bf16", {"--head-dim": "2"}), ("q8_0", {"--embd": "32", "--ffn": "32"}),
          ("q4_0", {"--embd": "32", "--ffn": "32", "--untied": None}),
          ("q4_1", {"--embd": "32", "--ffn": "32"}), ("q5_0", {"--embd": "32", "--ffn": "32"}),
          ("q5_1", {"--embd": "32", "--ffn": "32", "--kv-heads": "2"})]
MODEL_DEFAULTS = {"--vocab": "260", "--embd": "8", "--layers": "1", "--heads": "2",
                  "--kv-heads": "1", "--ffn": "16", "--ctx": "128"}


def gguf_seeds(out, exe, tmp):
    models = []
    for i, (wt, opts) in enumerate(MODELS):
        path = os.path.join(tmp, "m%d.gguf" % i)
        cmd = [exe, "mkmodel", "--type", wt, "--seed", str(i + 1)]
        for k, v in dict(MODEL_DEFAULTS, **opts).items():
            cmd += [k] if v is None else [k, v]
        subprocess.run(cmd + [path], check=True)
        with open(path, "rb") as f:
            put(out, "gguf", f.read())
        models.append(path)
    return models


def session_seeds(out, exe, model, tmp):
    runs = [["cot", "-k", "3", "-n", "4", "-p", "ab"],
            ["cot", "-k", "2", "-n", "3", "--chat-template", "chatml", "-p", "hi"],
            ["beam", "-B", "3", "-n", "3", "-p", "a"]]
    for i, r in enumerate(runs):
        path = os.path.join(tmp, "s%d.json" % i)
        subprocess.run([exe, r[0], "-m", model, "-q", "--save", path] + r[1:], check=True,
                       stdout=subprocess.DEVNULL)
        with open(path, "rb") as f:
            put(out, "session", f.read())
    put(out, "session", '{"format":"multidecode-session","version":1}')


def chat_seeds(out):
    jinja = ["chatml", "llama3", "llama2", "zephyr", "gemma", "<|im_start|>",
             "{{'<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by "
             "Hugging Face<|im_end|>\\n'}}<|im_start|>",
             "<|start_header_id|><|end_header_id|>", "<start_of_turn>", "[INST] <<SYS>>",
             "<|user|><|assistant|>eos_token"]
    convs = [[], ["\x01", "Hello"], ["\x00", "Be brief.", "\x01", " Hi \n", "\x02", " Yo "],
             ["tool", "x", "\x02", "ok"], ["\x01", "\xe2\x80\x80a\xc2\xa0"]]
    for i, j in enumerate(jinja):
        for k, c in enumerate(convs):
            put(out, "chat", bytes([(i * 7 + k * 29) & 0xFF]) + "\0".join([j] + c).encode())


def keys_seeds(out):
    with open("assets/keys", "rb") as f:
        put(out, "keys", f.read())
    for s in ["bind C-x quit\n", "unbind q forest\n", "bind F12 help # c\n",
              "bind \xc3\xa9 quit\nbind Space x\n", "Up\n", "bind\tPgDn\tquit\r\n"]:
        put(out, "keys", s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="./multidecode")
    ap.add_argument("--out", default="build/fuzz/corpus")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        models = gguf_seeds(a.out, a.bin, tmp)
        session_seeds(a.out, a.bin, models[0], tmp)
    chat_seeds(a.out)
    tok_seeds(a.out)
    keys_seeds(a.out)
    for name in sorted(os.listdir(a.out)):
        print("%s: %d inputs" % (name, len(os.listdir(os.path.join(a.out, name)))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
