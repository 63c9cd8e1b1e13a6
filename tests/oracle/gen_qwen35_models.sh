#!/bin/sh
# gen_qwen35_models.sh - writes tests/golden/qwen35models/ (f32_golden.sh): a random-weight
# Qwen3.5 made by our mkmodel in F32 (Gated DeltaNet layers with 2 key and 4 value heads of
# 32, conv width 4, between gated full-attention layers with Q/K norms and rotary on a
# quarter of the head; attention every 2nd layer), and llama.cpp's greedy decoding of it.
# With the argument qwen35moe it writes tests/golden/qwen35moe/ instead: the same layers
# with Qwen3.5-MoE's feed-forward (8 experts of width 64, 3 used per token, weights
# renormalised, and a shared expert of width 128 behind a sigmoid gate).
# Usage, from the repository root after `make multidecode`:
#   LLAMA_SRC=.../vendor/llama.cpp LLAMA_BUILD=.../build sh tests/oracle/gen_qwen35_models.sh [qwen35moe]
set -eu
. tests/oracle/f32_golden.sh
q35="--layers 4 --attn-every 2 --untied --vocab 260 --embd 128 --heads 4 --kv-heads 2 --head-dim 64 --ffn 128 --ctx 512 --ssm-state 32 --ssm-k-heads 2 --ssm-v-heads 4"
case ${1:-qwen35} in
qwen35) f32_golden qwen35 "--arch qwen35 $q35 --seed 11" ;;
qwen35moe)
    GEN_CMD="sh tests/oracle/gen_qwen35_models.sh qwen35moe"
    f32_golden qwen35moe "--arch qwen35moe $q35 --experts 8 --experts-used 3 --ffn-exp 64 --seed 15" tests/golden/qwen35moe ;;
*) echo "usage: $0 [qwen35|qwen35moe]" >&2; exit 2 ;;
esac
