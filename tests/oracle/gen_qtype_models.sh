#!/bin/sh
# gen_qtype_models.sh - writes tests/golden/qtypemodels/: the small random-weight llama of
# tests/golden/qmodels (same mkmodel shape and seed) in the quant types big models ship in,
# and golden.txt with llama.cpp's greedy decoding of four prompts (32 tokens, top-5 logits
# a step), which tests/test_qmodels.c replays (teacher-forced). Two kinds of file:
#   mk-TYPE.gguf  written by our `mkmodel --type TYPE` (Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4):
#                 every 2-D weight in TYPE, so our quantiser's files are read by llama.cpp
#                 and each type's product is the whole model's (MXFP4 has no llama.cpp
#                 ftype for a dense model: its MXFP4_MOE stores dense weights in Q8_0)
#   lq-FTYPE.gguf the F32 mkmodel rewritten by llama.cpp's llama_model_quantize (default
#                 params) to Q2_K, Q3_K_M, IQ4_NL, IQ4_XS: llama.cpp's own quantiser and
#                 mixes (it picks each tensor's type; golden.txt lists them)
# llama.cpp runs through tests/oracle/llama_greedy.c (build_llama_greedy.sh). Usage, from
# the repository root after `make multidecode`:
#   LLAMA_SRC=.../vendor/llama.cpp LLAMA_BUILD=.../build sh tests/oracle/gen_qtype_models.sh
set -eu
out=tests/golden/qtypemodels
shape="--vocab 260 --embd 256 --layers 1 --heads 4 --kv-heads 1 --ffn 256 --ctx 512 --untied --seed 7"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sh tests/oracle/build_llama_greedy.sh "$tmp/llama_greedy"
mkdir -p "$out"
# shellcheck disable=SC2086
./multidecode mkmodel $shape "$tmp/f32.gguf"
commit=$(git -C "${LLAMA_SRC:-.}" rev-parse HEAD 2>/dev/null || echo "0c1e57098bba43ac29e6e3b677cdceebdd22334f (llama-cpp-python 0.3.36)")
# model LABEL FILE TENSOR-LINES: the golden lines of one file
model() {
    echo "model $1 $2 $(stat -c %s "$out/$2") $(sha256sum "$out/$2" | cut -d' ' -f1)"
    cat "$3"
    "$tmp/llama_greedy" "$out/$2" 4 32
}
{
    echo "# golden.txt - llama.cpp greedy decoding of a random-weight llama (our mkmodel) in the"
    echo "# quant types Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4; tests/test_qmodels.c replays it."
    echo "# source: llama.cpp $commit, static libraries, tests/oracle/llama_greedy.c"
    echo "# generated: $(date -u +%Y-%m-%d) by sh tests/oracle/gen_qtype_models.sh (repository root)"
    echo "# mk-TYPE.gguf: ./multidecode mkmodel --type TYPE $shape"
    echo "# lq-FTYPE.gguf: ./multidecode mkmodel $shape (F32, sha256"
    echo "#   $(sha256sum "$tmp/f32.gguf" | cut -d' ' -f1)), stored with"
    echo "#   llama_model_quantize(llama_model_quantize_default_params(), ftype FTYPE)"
    echo "# llama.cpp settings: CPU backend, n_threads 2, n_ctx 128, KV cache F32, flash"
    echo "#   attention off."
    echo "# prompts: BOS then 8..24 ids uniform in [3, n_vocab) (splitmix64 from 4242, see"
    echo "#   llama_greedy.c); argmax of the last row's logits (first index on ties), 32"
    echo "#   tokens, no eog stop."
    echo "# format: as tests/golden/qmodels/golden.txt (gen_quant_models.py's header)."
    for t in Q2_K Q3_K IQ4_NL IQ4_XS MXFP4; do
        # shellcheck disable=SC2086
        ./multidecode mkmodel --type "$t" $shape "$out/mk-$t.gguf" >&2
        "$tmp/llama_greedy" --types "$out/mk-$t.gguf" > "$tmp/tensors"
        model "mk-$t" "mk-$t.gguf" "$tmp/tensors"
    done
    for t in Q2_K Q3_K_M IQ4_NL IQ4_XS; do
        "$tmp/llama_greedy" --quantize "$tmp/f32.gguf" "$out/lq-$t.gguf" "$t" > "$tmp/tensors"
        model "lq-$t" "lq-$t.gguf" "$tmp/tensors"
    done
} > "$out/golden.txt"
echo "wrote $out"
