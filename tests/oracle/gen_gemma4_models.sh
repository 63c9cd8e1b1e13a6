#!/bin/sh
# gen_gemma4_models.sh - writes tests/golden/gemma4models/ (f32_golden.sh): a random-weight
# Gemma 4 made by our mkmodel in F32 with every Gemma 4 feature this build runs (local
# layers of their own head size with an 8-token window, proportional rotary on the global
# layers, shared-KV layers, per-layer embeddings, layer output scales, logit
# soft-capping), and llama.cpp's greedy decoding of it. Usage, from the repository root
# after `make multidecode`:
#   LLAMA_SRC=.../vendor/llama.cpp LLAMA_BUILD=.../build sh tests/oracle/gen_gemma4_models.sh
set -eu
. tests/oracle/f32_golden.sh
f32_golden gemma4 "--arch gemma4 --layers 4 --swa-pattern 2 --kv-shared 2 --ple 32 --softcap 10 --swa 8 --untied --vocab 260 --embd 128 --heads 4 --kv-heads 1 --head-dim 64 --ffn 128 --ctx 512 --seed 11"
