#!/bin/sh
# gen_gemma4_models.sh - writes tests/golden/gemma4models/: a random-weight Gemma 4 made by
# our mkmodel in F32 with every Gemma 4 feature this build runs (local layers of their own
# head size with an 8-token window, proportional rotary on the global layers, shared-KV
# layers, per-layer embeddings, layer output scales, logit soft-capping), rewritten in F32
# by llama.cpp's llama_model_quantize, and golden.txt with llama.cpp's greedy decoding of
# four prompts (32 tokens, top-5 logits a step), which tests/test_qmodels.c replays. F32
# so that no rounding of activations blurs the comparison: a tight bound then catches
# any one feature done wrong.
#
# llama.cpp runs through tests/oracle/llama_greedy.c linked against a llama.cpp build's
# static libraries (llama-cpp-python's sources, built as tests/oracle/README.md says but
# with -DBUILD_SHARED_LIBS=OFF); the Python pipeline of gen_quant_models.py needs the
# shared build instead. Usage, from the repository root after `make multidecode`:
#   LLAMA_SRC=.../vendor/llama.cpp LLAMA_BUILD=.../build sh tests/oracle/gen_gemma4_models.sh
set -eu
export LLAMA_SRC="${LLAMA_SRC:?set LLAMA_SRC to the llama.cpp source folder}"
src=$LLAMA_SRC
export LLAMA_BUILD="${LLAMA_BUILD:?set LLAMA_BUILD to its build folder (static libraries)}"
out=tests/golden/gemma4models
args="--arch gemma4 --layers 4 --swa-pattern 2 --kv-shared 2 --ple 32 --softcap 10 --swa 8 --untied --vocab 260 --embd 128 --heads 4 --kv-heads 1 --head-dim 64 --ffn 128 --ctx 512 --seed 11"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sh tests/oracle/build_llama_greedy.sh "$tmp/llama_greedy"
mkdir -p "$out"
# shellcheck disable=SC2086
./multidecode mkmodel $args "$tmp/gemma4-mk.gguf"
"$tmp/llama_greedy" --quantize "$tmp/gemma4-mk.gguf" "$out/gemma4-F32.gguf" F32 > "$tmp/tensors"
commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo "0c1e57098bba43ac29e6e3b677cdceebdd22334f (llama-cpp-python 0.3.36)")
{
    echo "# golden.txt - llama.cpp greedy decoding of a random-weight Gemma 4 (our mkmodel)"
    echo "# rewritten by llama.cpp in F32; tests/test_qmodels.c replays it through our engine."
    echo "# source: llama.cpp $commit, static libraries, tests/oracle/llama_greedy.c"
    echo "# generated: $(date -u +%Y-%m-%d) by sh tests/oracle/gen_gemma4_models.sh (repository root)"
    echo "# source model (not kept): ./multidecode mkmodel $args"
    echo "#   sha256 $(sha256sum "$tmp/gemma4-mk.gguf" | cut -d' ' -f1)"
    echo "# stored with llama_model_quantize(llama_model_quantize_default_params(),"
    echo "#   ftype LLAMA_FTYPE_ALL_F32); the tensors' types are listed."
    echo "# llama.cpp settings: CPU backend, n_threads 2, n_ctx 128, KV cache F32, flash"
    echo "#   attention off."
    echo "# prompts: BOS then 8..24 ids uniform in [3, n_vocab) (splitmix64 from 4242, see"
    echo "#   llama_greedy.c); argmax of the last row's logits (first index on ties), 32"
    echo "#   tokens, no eog stop."
    echo "# format: as tests/golden/archmodels/golden.txt (gen_quant_models.py's header)."
    echo "model gemma4-F32 gemma4-F32.gguf $(stat -c %s "$out/gemma4-F32.gguf") $(sha256sum "$out/gemma4-F32.gguf" | cut -d' ' -f1)"
    cat "$tmp/tensors"
    "$tmp/llama_greedy" "$out/gemma4-F32.gguf" 4 32
} > "$out/golden.txt"
echo "wrote $out"
