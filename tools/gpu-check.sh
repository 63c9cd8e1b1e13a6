#!/bin/sh
# gpu-check.sh - everything a short GPU window should check, in one command:
# builds the program and the CUDA tests with nvcc for the device, runs the tests on it
# (the kernels, the cuda backend against ref, the forest through the cuda backend), then
# bench decode, bench forest and bench ask with --backend cuda and with cpu beside it.
# Logs, JSON and a summary go to one folder, $OUT when set (the device tool brings back at
# most 8 files, so $OUT gets summary.txt and one gpu-check.tgz of the rest). A second run
# on the same machine reuses the build (make is incremental). About 5 minutes on an H100:
# the cpu benches are cut short (GPU_CHECK_CPU=0 skips them).
#
#   sh tools/gpu-check.sh            (MODEL=path to use another GGUF)
#
# The model: models/SmolLM2-135M-Instruct.Q4_1.gguf when present, else (a device machine
# gets only the working tree, and the model is larger than what travels) a random-weight
# model of the same shape and type, written once into build/gpu-check/ by mkmodel: the same
# bytes per token, other tokens. Test fixtures: $MD_SHARED, else shared/ when the checkout
# has one (stories260K is skipped without it).
set -u
cd "$(dirname "$0")/.."
DIR=build/gpu-check
mkdir -p "$DIR"
SUM=$DIR/summary.txt
: >"$SUM"
J=$(nproc 2>/dev/null || echo 4)
say() { echo "$*" | tee -a "$SUM"; }
last() { tail -n 1 "$1" 2>/dev/null; }
[ -n "${MD_SHARED:-}" ] || { [ -d shared ] && export MD_SHARED=shared; }

say "gpu-check $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo +changes)"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader \
    >"$DIR/nvidia-smi.txt" 2>&1 || echo "(no nvidia-smi)" >"$DIR/nvidia-smi.txt"
say "device: $(cat "$DIR/nvidia-smi.txt")"

# 1. the build: the program with the device backend and the CUDA tests linked with it
t0=$(date +%s)
if ! make -j"$J" multidecode cuda-check build/cuda/test_cuda_kernels \
        build/cuda/tests/test_cuda_backend build/cuda/tests/test_cuda_forest >"$DIR/build.log" 2>&1; then
    say "build FAILED (build.log's tail below)"
    tail -n 30 "$DIR/build.log" | tee -a "$SUM"
    [ -n "${OUT:-}" ] && cp "$SUM" "$DIR/build.log" "$OUT"/
    exit 1
fi
say "build: $(($(date +%s) - t0)) s ($(grep -c '^NVCC' "$DIR/build.log") .cu files compiled this run)"

# 2. the tests on the device
rc=0
for t in build/cuda/test_cuda_kernels build/cuda/tests/test_cuda_backend build/cuda/tests/test_cuda_forest; do
    n=$(basename "$t")
    timeout 300 "$t" >"$DIR/$n.log" 2>&1 || rc=1
    say "$n: $(last "$DIR/$n.log")"
    grep -E 'FAIL|max (n)?err' "$DIR/$n.log" | head -n 20 | tee -a "$SUM" >/dev/null
done

# 3. the model, then the benches: cuda in full, cpu beside it cut short
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ ! -r "$MODEL" ]; then
    MODEL=$DIR/smollm2-shape-q4_1.gguf
    [ -f "$MODEL" ] || ./multidecode mkmodel --vocab 49152 --embd 576 --layers 30 --heads 9 \
        --kv-heads 3 --ffn 1536 --ctx 8192 --type Q4_1 "$MODEL" >>"$DIR/build.log" 2>&1
    say "model: random weights of SmolLM2-135M's shape (Q4_1): $MODEL"
else
    say "model: $MODEL"
fi
bench() { # NAME BACKEND ARGS...: JSON to NAME-BACKEND.json, stderr to .log, one line in the summary
    name=$1 be=$2
    shift 2
    t0=$(date +%s)
    st=ok
    timeout "${BENCH_TIMEOUT:-200}" ./multidecode bench "$name" -m "$MODEL" --backend "$be" "$@" \
        >"$DIR/bench-$name-$be.json" 2>"$DIR/bench-$name-$be.log" || { e=$?; rc=1; st="FAILED (exit $e): $(tail -n 1 "$DIR/bench-$name-$be.log")"; }
    say "bench $name --backend $be $*: $(($(date +%s) - t0)) s, $(wc -c <"$DIR/bench-$name-$be.json") bytes of JSON, $st"
}
bench decode cuda -t 1 -p 128 -n 64
bench forest cuda -p 2000 -s 8 -k 1,8,64,256 --baseline-max-k 8
bench ask cuda -p 4000 -N 1,64 -n 16 --no-copied
if [ "${GPU_CHECK_CPU:-1}" != 0 ]; then
    bench decode cpu -t "$J" -p 128 -n 32
    bench forest cpu -t "$J" -p 2000 -s 4 -k 1,8,64 --baseline-max-k 1
fi

# 4. what comes back
tar czf "$DIR.tgz" -C "$(dirname "$DIR")" "$(basename "$DIR")"
if [ -n "${OUT:-}" ]; then
    cp "$SUM" "$OUT"/
    cp "$DIR.tgz" "$OUT"/gpu-check.tgz
fi
say "done: $([ $rc = 0 ] && echo ok || echo 'SOME STEP FAILED')"
exit $rc
