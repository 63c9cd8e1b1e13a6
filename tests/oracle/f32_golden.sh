# f32_golden.sh - sourced by gen_gemma4_models.sh and gen_qwen35_models.sh: f32_golden
# NAME ARGS [OUT] writes OUT (default tests/golden/NAMEmodels/; GEN_CMD: the command the
# header names, default sh tests/oracle/gen_NAME_models.sh; KEEP_TYPE: keep mkmodel's file,
# written in that type, instead of llama.cpp's F32 rewrite): a random-weight model made by our mkmodel
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
    qt=${KEEP_TYPE:-F32}
    if [ -n "${KEEP_TYPE:-}" ]; then
        cp "$tmp/$name-mk.gguf" "$out/$name-$qt.gguf"
        "$tmp/llama_greedy" --types "$out/$name-$qt.gguf" > "$tmp/tensors"
        stored="kept as our mkmodel wrote it (--type $qt); the tensors' types are listed."
        kept="kept as $name-$qt.gguf"
        form="in $qt as our mkmodel wrote it"
    else
        "$tmp/llama_greedy" --quantize "$tmp/$name-mk.gguf" "$out/$name-F32.gguf" F32 > "$tmp/tensors"
        stored="stored with llama_model_quantize(llama_model_quantize_default_params(),
#   ftype LLAMA_FTYPE_ALL_F32); the tensors' types are listed."
        kept="not kept"
        form="rewritten by llama.cpp in F32"
    fi
    commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo "0c1e57098bba43ac29e6e3b677cdceebdd22334f (llama-cpp-python 0.3.36)")
    {
        echo "# golden.txt - llama.cpp greedy decoding of a random-weight $name (our mkmodel)"
        echo "# $form; tests/test_qmodels.c replays it through our engine."
        echo "# source: llama.cpp $commit, static libraries, tests/oracle/llama_greedy.c"
        echo "# generated: $(date -u +%Y-%m-%d) by ${GEN_CMD:-sh tests/oracle/gen_${name}_models.sh} (repository root)"
        echo "# source model ($kept): ./multidecode mkmodel $args"
        echo "#   sha256 $(sha256sum "$tmp/$name-mk.gguf" | cut -d' ' -f1)"
        echo "# $stored"
        echo "# llama.cpp settings: CPU backend, n_threads 2, n_ctx 128, KV cache F32, flash"
        echo "#   attention off."
        echo "# prompts: BOS then 8..24 ids uniform in [3, n_vocab) (splitmix64 from 4242, see"
        echo "#   llama_greedy.c); argmax of the last row's logits (first index on ties), 32"
        echo "#   tokens, no eog stop."
        echo "# format: as tests/golden/archmodels/golden.txt (gen_quant_models.py's header)."
        echo "model $name-$qt $name-$qt.gguf $(stat -c %s "$out/$name-$qt.gguf") $(sha256sum "$out/$name-$qt.gguf" | cut -d' ' -f1)"
        cat "$tmp/tensors"
        "$tmp/llama_greedy" "$out/$name-$qt.gguf" 4 32
    } > "$out/golden.txt"
    echo "wrote $out"
}
