# f32_golden.sh - sourced by gen_gemma4_models.sh and gen_qwen35_models.sh: f32_golden
# NAME ARGS [OUT] writes OUT (default tests/golden/NAMEmodels/; GEN_CMD: the command the
# header names, default sh tests/oracle/gen_NAME_models.sh): a random-weight model made by our mkmodel
# (ARGS), rewritten in F32 by llama.cpp's llama_model_quantize, and golden.txt with
# llama.cpp's greedy decoding of four prompts (32 tokens, top-5 logits a step), which
# tests/test_qmodels.c replays. F32 so that no rounding of activations blurs the
# comparison: a tight bound then catches any one feature done wrong.
#
# llama.cpp runs through tests/oracle/llama_greedy.c linked against a llama.cpp build's
# static libraries (LLAMA_SRC: its sources, LLAMA_BUILD: its build with
# -DBUILD_SHARED_LIBS=OFF). Run from the repository root after `make multidecode`.
f32_golden() {
    name=$1
    args=$2
    src=${LLAMA_SRC:?set LLAMA_SRC to the llama.cpp source folder}
    bld=${LLAMA_BUILD:?set LLAMA_BUILD to its build folder (static libraries)}
    out=${3:-tests/golden/${name}models}
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    sh tests/oracle/build_llama_greedy.sh "$tmp/llama_greedy"
    mkdir -p "$out"
    # shellcheck disable=SC2086
    ./multidecode mkmodel $args "$tmp/$name-mk.gguf"
    "$tmp/llama_greedy" --quantize "$tmp/$name-mk.gguf" "$out/$name-F32.gguf" F32 > "$tmp/tensors"
    commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo "0c1e57098bba43ac29e6e3b677cdceebdd22334f (llama-cpp-python 0.3.36)")
    {
        echo "# golden.txt - llama.cpp greedy decoding of a random-weight $name (our mkmodel)"
        echo "# rewritten by llama.cpp in F32; tests/test_qmodels.c replays it through our engine."
        echo "# source: llama.cpp $commit, static libraries, tests/oracle/llama_greedy.c"
        echo "# generated: $(date -u +%Y-%m-%d) by ${GEN_CMD:-sh tests/oracle/gen_${name}_models.sh} (repository root)"
        echo "# source model (not kept): ./multidecode mkmodel $args"
        echo "#   sha256 $(sha256sum "$tmp/$name-mk.gguf" | cut -d' ' -f1)"
        echo "# stored with llama_model_quantize(llama_model_quantize_default_params(),"
        echo "#   ftype LLAMA_FTYPE_ALL_F32); the tensors' types are listed."
        echo "# llama.cpp settings: CPU backend, n_threads 2, n_ctx 128, KV cache F32, flash"
        echo "#   attention off."
        echo "# prompts: BOS then 8..24 ids uniform in [3, n_vocab) (splitmix64 from 4242, see"
        echo "#   llama_greedy.c); argmax of the last row's logits (first index on ties), 32"
        echo "#   tokens, no eog stop."
        echo "# format: as tests/golden/archmodels/golden.txt (gen_quant_models.py's header)."
        echo "model $name-F32 $name-F32.gguf $(stat -c %s "$out/$name-F32.gguf") $(sha256sum "$out/$name-F32.gguf" | cut -d' ' -f1)"
        cat "$tmp/tensors"
        "$tmp/llama_greedy" "$out/$name-F32.gguf" 4 32
    } > "$out/golden.txt"
    echo "wrote $out"
}
