#!/usr/bin/env python3
"""gen_smollm2.py - writes tests/golden/smollm2_greedy.txt: greedy continuations of
SmolLM2-135M-Instruct (Q4_1 GGUF) computed by llama.cpp (through llama-cpp-python), an
implementation nobody here wrote. tests/test_smollm2.c replays them through our engine.

For each prompt, in two forms (raw text, and the model's ChatML template), it records
the prompt token ids exactly as llama.cpp tokenised them (so the C test does not depend
on our tokenizer), then decodes greedily: argmax over the raw logits (first index on
ties), no temperature, penalty or sampler, up to 64 tokens or an end-of-generation
token. For every generated token it records the top-5 (id, logit) pairs of the logits
it was picked from. Greedy decoding is done with the
low-level Llama.eval + Llama.scores, so no sampler code is involved.

With `--set gemma3` it writes tests/golden/gemma3_greedy.txt for Gemma 3 270M (Q4_K_M,
`make model MODEL=gemma3`) instead: eight raw prompts, two of them TinyStories text longer
than Gemma's 512-token sliding window (read from ../shared/models), so that the local
layers' window matters.

Usage (from the repository root, in the oracle venv, see tests/oracle/README.md):
    python tests/oracle/gen_smollm2.py [-m models/SmolLM2-135M-Instruct.Q4_1.gguf]
                                       [-o tests/golden/smollm2_greedy.txt]
    python tests/oracle/gen_smollm2.py --set gemma3
"""
import argparse
import datetime
import hashlib
import json
import sys

import numpy as np
import llama_cpp
from llama_cpp import Llama

N_GEN = 64
TOP_K = 5
SEED = 1234
# The llama.cpp commit vendored in llama-cpp-python 0.3.36's sdist (vendor/llama.cpp).
LLAMA_CPP_COMMIT = {"0.3.36": "0c1e57098bba43ac29e6e3b677cdceebdd22334f"}

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
CHAT = ("<|im_start|>system\n" + SYSTEM + "<|im_end|>\n"
        "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n")

PROMPTS = [
    ("story", "Once upon a time, in a small village by the sea, there lived a"),
    ("code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"),
    ("math", "Solve for x: 3x + 7 = 22. First, subtract 7 from both sides:"),
    ("list", "Here are five tips for staying healthy:\n1."),
    ("question", "Question: Why is the sky blue?\nAnswer:"),
    ("french", "Écris une courte phrase sur la mer, s'il te plaît. Voici :"),
    ("chinese", "请用一句话介绍一下长城。"),
    ("emptyish", " "),
    ("paragraph",
     "The history of the printing press begins in the fifteenth century, when Johannes "
     "Gutenberg combined movable metal type, oil-based ink and a wooden screw press into "
     "a system that could produce books far faster than scribes. Within fifty years, "
     "printing shops had spread to more than two hundred cities across Europe, and "
     "millions of volumes were in circulation. The consequences were enormous: literacy "
     "rose, scientific results could be shared and checked, and religious and political "
     "ideas travelled faster than any authority could contain them. Historians still "
     "debate which of these effects mattered most, but almost all agree that"),
]


# --set gemma3: six of the prompts above, raw only, then two long ones.
GEMMA_PROMPTS = ("story", "code", "math", "question", "chinese", "paragraph")
TINYSTORIES = "../shared/models/tinystories_val_subset.txt"
LONG_CHARS = (3000, 4800)  # about 700 and 1100 Gemma tokens, past its 512-token window


def long_prompts(path):
    """Two prefixes of the TinyStories text, cut at the last space before LONG_CHARS."""
    with open(path, encoding="utf-8") as f:
        text = f.read(max(LONG_CHARS) + 100)
    return [(f"long{n}", text[:text.rindex(" ", 0, n)]) for n in LONG_CHARS]


SETS = {
    "smollm2": dict(model="models/SmolLM2-135M-Instruct.Q4_1.gguf",
                    out="tests/golden/smollm2_greedy.txt", forms=("raw", "chat"),
                    title="SmolLM2-135M-Instruct (Q4_1)", eog=("<|im_end|>", "<|endoftext|>"),
                    n_ctx=2048),
    "gemma3": dict(model="models/gemma-3-270m-q4_k_m.gguf",
                   out="tests/golden/gemma3_greedy.txt", forms=("raw",),
                   title="Gemma 3 270M (Q4_K_M)", eog=("<end_of_turn>", "<eos>"),
                   n_ctx=1280),  # Llama keeps n_ctx rows of 262,144 logits: 1.3 GB
}


def top_pairs(logits, k):
    """The k largest (id, logit), largest first; ties broken by lower id."""
    idx = np.lexsort((np.arange(logits.size), -logits))[:k]
    return [(int(i), float(logits[i])) for i in idx]


def greedy(llm, prompt_ids, eog):
    llm.reset()
    llm.eval(prompt_ids)
    gen, steps = [], []
    for i in range(N_GEN):
        logits = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        t = int(np.argmax(logits))  # first index on ties, like sample_argmax
        pairs = top_pairs(logits, TOP_K)
        assert pairs[0][0] == t
        steps.append(pairs)
        gen.append(t)
        if t in eog:
            return gen, "eog", steps
        if i + 1 < N_GEN:
            llm.eval([t])
    return gen, "length", steps


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def fmt(x):
    return format(x, ".9g")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", choices=sorted(SETS), default="smollm2")
    ap.add_argument("-m", "--model")
    ap.add_argument("-o", "--out")
    args = ap.parse_args()
    cfg = SETS[args.set]
    args.model = args.model or cfg["model"]
    args.out = args.out or cfg["out"]
    prompts = PROMPTS
    if args.set == "gemma3":
        prompts = [p for p in PROMPTS if p[0] in GEMMA_PROMPTS] + long_prompts(TINYSTORIES)

    llm = Llama(model_path=args.model, n_ctx=cfg["n_ctx"], logits_all=True, n_threads=2,
                n_threads_batch=2, seed=SEED, flash_attn=False,
                type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32, verbose=False)
    eog = {llm.token_eos()}
    for s in cfg["eog"]:
        ids = llm.tokenize(s.encode(), add_bos=False, special=True)
        if len(ids) == 1:
            eog.add(ids[0])
    eog = sorted(eog)
    lv = llama_cpp.__version__  # also when run from the sdist with LLAMA_CPP_LIB_PATH

    with open(args.out, "w") as out:
        out.write(
            f"# {args.out.split('/')[-1]} - greedy decoding goldens for {cfg['title']}\n"
            "# from llama.cpp, an independent implementation, via llama-cpp-python.\n"
            f"# source: llama-cpp-python {lv}, llama.cpp commit "
            f"{LLAMA_CPP_COMMIT.get(lv, 'unknown')}, numpy {np.__version__}, "
            f"python {sys.version.split()[0]}\n"
            f"# llama.cpp settings: CPU backend, n_threads 2, n_ctx {cfg['n_ctx']}, KV cache F32 (llama.cpp's\n"
            "#   default is F16; ours is float), flash attention off\n"
            f"# model: {args.model.split('/')[-1]} sha256 {sha256(args.model)}\n"
            f"# generated: {datetime.date.today().isoformat()} by "
            f"python tests/oracle/gen_smollm2.py --set {args.set} (from the repository root)\n"
            "# decoding: llama.cpp tokenizer (add_special as the model says, special tokens\n"
            "#   parsed only in the chat form); Llama.eval, then argmax of Llama.scores (first\n"
            f"#   index on ties), at most {N_GEN} tokens, stopping after an eog token.\n"
            "# format:\n"
            "#   eog ID...                    token ids that end generation\n"
            "#   case NAME FORM               FORM is raw or chat\n"
            "#   prompt N ID...               the prompt ids as llama.cpp tokenised them\n"
            "#   gen N STOP ID...             greedy ids; STOP is eog or length\n"
            f"#   step I (ID LOGIT)x{TOP_K}        (N lines) the top-{TOP_K} of the logits gen[I] was\n"
            "#                                picked from, largest first (I = 0: last prompt row)\n"
            "#   end\n"
            "# a '# text:' comment before each case holds the prompt as a JSON string.\n")
        out.write("eog " + " ".join(map(str, eog)) + "\n")
        for name, text in prompts:
            for form in cfg["forms"]:
                full = text if form == "raw" else CHAT.format(prompt=text)
                ids = llm.tokenize(full.encode("utf-8"), add_bos=True, special=(form == "chat"))
                gen, stop, steps = greedy(llm, ids, set(eog))
                out.write(f"# text: {json.dumps(full, ensure_ascii=False)}\n")
                out.write(f"case {name} {form}\n")
                out.write(f"prompt {len(ids)} " + " ".join(map(str, ids)) + "\n")
                out.write(f"gen {len(gen)} {stop} " + " ".join(map(str, gen)) + "\n")
                for i, pairs in enumerate(steps):
                    out.write(f"step {i} " + " ".join(f"{t} {fmt(l)}" for t, l in pairs) + "\n")
                out.write("end\n")
                print(f"{name}/{form}: {len(ids)} prompt ids, {len(gen)} generated ({stop}): "
                      f"{llm.detokenize(gen).decode('utf-8', 'replace')[:70]!r}", file=sys.stderr)


if __name__ == "__main__":
    main()
