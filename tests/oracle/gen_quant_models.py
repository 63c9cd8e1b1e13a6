#!/usr/bin/env python3
"""gen_quant_models.py - writes tests/golden/qmodels/: one small random-weight llama
quantised by llama.cpp itself to each weight type our kernels multiply (Q4_0, Q4_1, Q5_0,
Q5_1, Q8_0, Q4_K_M, Q4_K_S, Q5_K_S, Q6_K), and golden.txt with llama.cpp's greedy
continuations and top-5 logits on each. tests/test_qmodels.c replays them through our
engine, so both our reading of llama.cpp's quantised files and our quantised matmuls
are checked against an implementation nobody here wrote.

Steps: `./multidecode mkmodel` (our generator; run `make` first) writes an F32 model
with the shape below into a temporary folder; llama_cpp.llama_model_quantize with
llama_model_quantize_default_params() and each ftype writes <TYPE>.gguf (llama.cpp
chooses the type of every tensor: its Q4_K_M, for instance, keeps attn_v/ffn_down in
Q6_K, and output.weight becomes Q6_K in most types; golden.txt lists them per file);
then llama.cpp (CPU, float32 KV cache, flash attention off, as gen_smollm2.py) decodes
fixed prompts of random token ids greedily: argmax of Llama.scores after Llama.eval,
N_GEN tokens, no eog stop (the vocabulary is synthetic noise), recording for every step
the top-5 (id, logit) pairs the token was picked from.

The shape is as small as K-quants allow: every row length (n_embd, n_head * head_dim,
n_ff) is 256, the K-quant super-block, so llama.cpp keeps K-quant tensors in K-quant
types instead of falling back; one layer and the smallest vocabulary mkmodel accepts
keep each file at 0.3-0.5 MB. Untied, so token_embd is stored in the file's main type
and the embedding lookup of every type is exercised too.

With `--set arch` it writes tests/golden/archmodels/ instead: the other architectures
mkmodel writes (qwen2 with its Q/K/V biases, qwen3 with its per-head Q/K norms, gemma3
with its four norms per layer, GELU feed-forward and a sliding window of 8 tokens on five
local layers before a global sixth, so that every prompt runs past the window), each
stored by llama.cpp as Q8_0 and Q4_K_M (gemma3: Q8_0); file names are ARCH-TYPE.gguf. qwen2 has
linear RoPE scaling by 2 (every layer), gemma3 by 4 (its global layer only, as Gemma 3
4B and larger).

Usage (from the repository root, in the oracle venv, see tests/oracle/README.md):
    make multidecode && python tests/oracle/gen_quant_models.py [-o tests/golden/qmodels]
    make multidecode && python tests/oracle/gen_quant_models.py --set arch
"""
import argparse
import ctypes
import datetime
import hashlib
import os
import subprocess
import sys
import tempfile

import numpy as np
import llama_cpp
from llama_cpp import Llama
from gguf import GGUFReader

# mkmodel shape: head_dim = 256 / 4 = 64, so attn_k/attn_v are (64, 256).
MKMODEL_ARGS = ["--vocab", "260", "--embd", "256", "--layers", "1", "--heads", "4",
                "--kv-heads", "1", "--ffn", "256", "--ctx", "512", "--untied", "--seed", "7"]
FTYPES = [
    ("Q4_0", llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0),
    ("Q4_1", llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_1),
    ("Q5_0", llama_cpp.LLAMA_FTYPE_MOSTLY_Q5_0),
    ("Q5_1", llama_cpp.LLAMA_FTYPE_MOSTLY_Q5_1),
    ("Q8_0", llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0),
    ("Q4_K_M", llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M),
    ("Q4_K_S", llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_S),
    ("Q5_K_S", llama_cpp.LLAMA_FTYPE_MOSTLY_Q5_K_S),
    ("Q6_K", llama_cpp.LLAMA_FTYPE_MOSTLY_Q6_K),
]
# --set arch: (arch, mkmodel options) and the types llama.cpp stores each in. Row lengths
# stay 256 for the K-quants; gemma3's pattern makes every sixth layer global, so six
# layers give five windowed ones and one global.
ARCH_SHAPE = ["--vocab", "260", "--embd", "256", "--heads", "4", "--kv-heads", "1",
              "--head-dim", "64", "--ffn", "256", "--ctx", "512", "--seed", "11"]
ARCH_FAMILIES = [
    ("qwen2", ["--arch", "qwen2", "--layers", "2", "--untied", "--rope-scale", "2"] + ARCH_SHAPE,
     ("Q8_0", "Q4_K_M")),
    ("qwen3", ["--arch", "qwen3", "--layers", "2"] + ARCH_SHAPE, ("Q8_0", "Q4_K_M")),
    # Q8_0 only: six layers are the biggest file, and Gemma 3 270M's goldens
    # (gen_smollm2.py --set gemma3) cover its Q4_K_M
    ("gemma3", ["--arch", "gemma3", "--layers", "6", "--swa", "8", "--rope-scale", "4"]
     + ARCH_SHAPE, ("Q8_0",)),
]
N_PROMPTS = 4
PROMPT_LEN = (8, 24)     # inclusive range of random ids after BOS
N_GEN = 32
TOP_K = 5
SEED = 4242
BOS = 1
FIRST_ORDINARY = 3       # ids 0..2 are <unk>, <s>, </s>; prompts use 3..n_vocab-1
# The llama.cpp commit vendored in llama-cpp-python 0.3.36's sdist (vendor/llama.cpp).
LLAMA_CPP_COMMIT = {"0.3.36": "0c1e57098bba43ac29e6e3b677cdceebdd22334f"}


def top_pairs(logits, k):
    """The k largest (id, logit), largest first; ties broken by lower id."""
    idx = np.lexsort((np.arange(logits.size), -logits))[:k]
    return [(int(i), float(logits[i])) for i in idx]


def greedy(llm, prompt_ids):
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
        if i + 1 < N_GEN:
            llm.eval([t])
    return gen, steps


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def quantize(src, dst, ftype):
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = 2
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))
    if rc != 0:
        sys.exit(f"llama_model_quantize({dst}) failed: {rc}")


def tensor_types(path):
    """[(name, type name)] in file order."""
    return [(t.name, t.tensor_type.name) for t in GGUFReader(path).tensors]


def fmt(x):
    return format(x, ".9g")


def decode_file(path, label, prompts, n_vocab, lines):
    """Appends the golden lines of one stored file: its header, tensor types and cases."""
    types = tensor_types(path)
    llm = Llama(model_path=path, n_ctx=128, logits_all=True, n_threads=2,
                n_threads_batch=2, seed=SEED, flash_attn=False,
                type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32,
                verbose=False)
    assert llm.n_vocab() == n_vocab
    size = os.path.getsize(path)
    lines.append(f"model {label} {os.path.basename(path)} {size} {sha256(path)}\n")
    for tn, tt in types:
        lines.append(f"tensor {tn} {tt}\n")
    for ci, ids in enumerate(prompts):
        gen, steps = greedy(llm, ids)
        lines.append(f"case p{ci}\n")
        lines.append(f"prompt {len(ids)} " + " ".join(map(str, ids)) + "\n")
        lines.append(f"gen {len(gen)} length " + " ".join(map(str, gen)) + "\n")
        for i, pairs in enumerate(steps):
            lines.append(f"step {i} " + " ".join(f"{t} {fmt(v)}" for t, v in pairs) + "\n")
        lines.append("end\n")
    del llm
    summary = {}
    for tn, tt in types:
        summary.setdefault(tt, []).append(tn)
    print(f"{label}: {size} bytes; " + "; ".join(
        f"{tt}: {len(v)} tensors" if tt in (label.split("-")[-1], "F32") or len(v) > 3 else
        f"{tt}: {', '.join(v)}" for tt, v in summary.items()), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", choices=("llama", "arch"), default="llama")
    ap.add_argument("-o", "--out")
    ap.add_argument("--mkmodel", default="./multidecode")
    args = ap.parse_args()
    if args.set == "llama":
        families = [("", MKMODEL_ARGS, FTYPES)]
        out_dir = args.out or "tests/golden/qmodels"
    else:
        families = [(a + "-", mk, [f for f in FTYPES if f[0] in types])
                    for a, mk, types in ARCH_FAMILIES]
        out_dir = args.out or "tests/golden/archmodels"
    os.makedirs(out_dir, exist_ok=True)

    rng = np.random.default_rng(SEED)
    n_vocab = int(MKMODEL_ARGS[MKMODEL_ARGS.index("--vocab") + 1])
    prompts = []
    for _ in range(N_PROMPTS):
        n = int(rng.integers(PROMPT_LEN[0], PROMPT_LEN[1] + 1))
        prompts.append([BOS] + [int(x) for x in rng.integers(FIRST_ORDINARY, n_vocab, n)])

    lv = llama_cpp.__version__  # also when run from the sdist with LLAMA_CPP_LIB_PATH
    lines, sources = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for prefix, mkargs, ftypes in families:
            f32 = os.path.join(tmp, prefix + "src.gguf")
            subprocess.run([args.mkmodel, "mkmodel"] + mkargs + [f32], check=True,
                           stdout=subprocess.DEVNULL)
            sources.append("# F32 source model (not kept): ./multidecode mkmodel "
                           + " ".join(mkargs) + f"\n#   sha256 {sha256(f32)}\n")
            for name, ftype in ftypes:
                path = os.path.join(out_dir, prefix + name + ".gguf")
                quantize(f32, path, ftype)
                decode_file(path, prefix + name, prompts, n_vocab, lines)

    cmd = "python tests/oracle/gen_quant_models.py" + (" --set arch" if args.set == "arch" else "")
    with open(os.path.join(out_dir, "golden.txt"), "w") as out:
        out.write(
            "# golden.txt - llama.cpp greedy decoding of random-weight models (our mkmodel)\n"
            "# stored by llama.cpp in each type; tests/test_qmodels.c replays it through our engine.\n"
            f"# source: llama-cpp-python {lv}, llama.cpp commit "
            f"{LLAMA_CPP_COMMIT.get(lv, 'unknown')}, numpy {np.__version__}, "
            f"python {sys.version.split()[0]}\n"
            f"# generated: {datetime.date.today().isoformat()} by "
            f"make multidecode && {cmd} (repository root)\n"
            + "".join(sources) +
            "# stored with llama_model_quantize(llama_model_quantize_default_params(),\n"
            "#   ftype LLAMA_FTYPE_MOSTLY_<TYPE>); llama.cpp picks each tensor's type (listed).\n"
            "# llama.cpp settings: CPU backend, n_threads 2, n_ctx 128, KV cache F32, flash\n"
            "#   attention off.\n"
            f"# prompts: BOS then {PROMPT_LEN[0]}..{PROMPT_LEN[1]} ids uniform in "
            f"[{FIRST_ORDINARY}, n_vocab) (numpy default_rng({SEED})), the same for every\n"
            f"#   model; Llama.eval, then argmax of Llama.scores (first index on ties), {N_GEN}\n"
            "#   tokens, no eog stop.\n"
            "# format:\n"
            "#   model TYPE FILE BYTES SHA256   starts a model; FILE is beside this file\n"
            "#   tensor NAME TYPE               (one per tensor) the type llama.cpp stored\n"
            "#   case NAME\n"
            "#   prompt N ID...                 the prompt ids fed\n"
            "#   gen N length ID...             llama.cpp's greedy ids\n"
            f"#   step I (ID LOGIT)x{TOP_K}          (N lines) the top-{TOP_K} of the logits "
            "gen[I] was\n"
            "#                                  picked from, largest first (I = 0: last "
            "prompt row)\n"
            "#   end                            ends a case\n")
        out.writelines(lines)


if __name__ == "__main__":
    main()
