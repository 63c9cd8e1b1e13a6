#!/bin/sh
# build_llama_greedy.sh OUT - builds tests/oracle/llama_greedy.c into OUT against the static
# libraries of a llama.cpp build (LLAMA_SRC: its source folder, LLAMA_BUILD: its build
# folder, configured with -DBUILD_SHARED_LIBS=OFF); the generators that run llama.cpp
# through it (gen_gemma4_models.sh, gen_qtype_models.sh) share this step.
set -eu
src=${LLAMA_SRC:?set LLAMA_SRC to the llama.cpp source folder}
bld=${LLAMA_BUILD:?set LLAMA_BUILD to its build folder (static libraries)}
g++ -x c -std=c11 -O1 -I"$src/include" -I"$src/ggml/include" tests/oracle/llama_greedy.c -x none \
    "$bld/src/libllama.a" "$bld/ggml/src/libggml.a" "$bld/ggml/src/libggml-cpu.a" \
    "$bld/ggml/src/libggml-base.a" -lgomp -lpthread -lm -o "${1:?usage: build_llama_greedy.sh OUT}"
