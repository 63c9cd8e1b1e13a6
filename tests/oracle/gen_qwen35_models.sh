#!/bin/sh
# gen_qwen35_models.sh - writes tests/golden/qwen35models/ (f32_golden.sh): a random-weight
# Qwen3.5 made by our mkmodel in F32 (Gated DeltaNet layers with 2 key and 4 value heads of
# 32, conv width 4, between gated full-attention layers with Q/K norms and rotary on a
# quarter of the head; attention every 2nd layer), and llama.cpp's greedy decoding of it.
# Usage, from the repository root after `make multidecode`:
#   LLAMA_SRC=.../vendor/llama.cpp LLAMA_BUILD=.../build sh tests/oracle/gen_qwen35_models.sh
set -eu
. tests/oracle/f32_golden.sh
f32_golden qwen35 "--arch qwen35 --layers 4 --attn-every 2 --untied --vocab 260 --embd 128 --heads 4 --kv-heads 2 --head-dim 64 --ffn 128 --ctx 512 --ssm-state 32 --ssm-k-heads 2 --ssm-v-heads 4 --seed 11"
