#!/bin/sh
# gen_gemma4_models.sh - writes tests/golden/gemma4models/ (f32_golden.sh): a random-weight
# Gemma 4 made by our mkmodel in F32 with every Gemma 4 feature this build runs (local
# layers of their own head size with an 8-token window, proportional rotary on the global
# layers, shared-KV layers, per-layer embeddings, layer output scales, logit
# soft-capping), and llama.cpp's greedy decoding of it. With the argument qwen3moe,
# qwen2moe or gpt-oss it writes tests/golden/<set>/ instead: a random Qwen3-MoE (8
# experts of width 64, 3 used per token, weights renormalised), Qwen2-MoE (the same
# experts, weights as the softmax gives them, and a shared expert with a sigmoid gate) or
# gpt-oss (the same experts with biases and the clamped SwiGLU, attention sinks, a window
# of 8 on every other layer, YaRN by 4 from 128 tokens; prompts of 9..25 tokens, so the
# window matters); gpt-oss-mxfp4: another gpt-oss as its files are stored (MXFP4 experts,
# Q8_0 other matrices), kept as our mkmodel wrote it (tests/golden/gptoss-mxfp4/). Usage, from the repository root after `make multidecode`:
#   LLAMA_SRC=.../vendor/llama.cpp LLAMA_BUILD=.../build sh tests/oracle/gen_gemma4_models.sh [qwen3moe|qwen2moe|gpt-oss|gpt-oss-mxfp4]
set -eu
. tests/oracle/f32_golden.sh
case ${1:-gemma4} in
gemma4)
    f32_golden gemma4 "--arch gemma4 --layers 4 --swa-pattern 2 --kv-shared 2 --ple 32 --softcap 10 --swa 8 --untied --vocab 260 --embd 128 --heads 4 --kv-heads 1 --head-dim 64 --ffn 128 --ctx 512 --seed 11" ;;
qwen3moe)
    f32_golden qwen3moe "--arch qwen3moe --layers 2 --experts 8 --experts-used 3 --ffn-exp 64 --untied --vocab 260 --embd 128 --heads 4 --kv-heads 1 --head-dim 64 --ffn 128 --ctx 512 --seed 12" tests/golden/qwen3moe ;;
qwen2moe)
    f32_golden qwen2moe "--arch qwen2moe --layers 2 --experts 8 --experts-used 3 --ffn-exp 64 --untied --vocab 260 --embd 128 --heads 4 --kv-heads 1 --head-dim 32 --ffn 128 --ctx 512 --seed 13" tests/golden/qwen2moe ;;
gpt-oss)
    f32_golden gpt-oss "--arch gpt-oss --layers 2 --experts 8 --experts-used 3 --ffn-exp 64 --swa 8 --yarn 4 --untied --vocab 260 --embd 128 --heads 4 --kv-heads 1 --head-dim 32 --ffn 128 --ctx 512 --seed 14" tests/golden/gptoss ;;
gpt-oss-mxfp4)
    KEEP_TYPE=MXFP4 GEN_CMD="sh tests/oracle/gen_gemma4_models.sh gpt-oss-mxfp4"
    f32_golden gpt-oss "--arch gpt-oss --type MXFP4 --layers 1 --experts 8 --experts-used 3 --ffn-exp 64 --swa 8 --yarn 4 --untied --vocab 260 --embd 128 --heads 4 --kv-heads 1 --head-dim 32 --ffn 128 --ctx 512 --seed 16" tests/golden/gptoss-mxfp4 ;;
*) echo "usage: $0 [gemma4|qwen3moe|qwen2moe|gpt-oss|gpt-oss-mxfp4]" >&2; exit 2 ;;
esac
