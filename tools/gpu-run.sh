#!/bin/sh
# gpu-run.sh - the whole GPU check in one command for a short device window: the
# device, the CUDA tests on it, exactness (forest = linear decoding on the device; greedy
# tokens and beam log-probabilities against the ref backend), then benches on random-weight
# models made on the spot, then compute-sanitizer, most important first. Each step runs
# under `timeout` within a time budget and is skipped when its estimate no longer fits; its
# log lands in build/gpu-run the moment it ends, and $OUT's two files (the device tool
# returns at most 8) are rewritten after each step: summary.json (every step so far:
# status, exit code, seconds, last line) and results.tgz (every log and JSON), so a run
# cut off still returns what it finished.
#
#   OUT=dir sh tools/gpu-run.sh      (GPU_RUN_BUDGET=seconds, default 450: give the
#                                     command that runs it a limit of 540 or more)
#
# It uses the pack `make gpu-pack` built (build/gpu-pack, or $GPU_PACK; carried to the
# GPU machine beside the working tree), else builds with make there. Without a GPU it
# says so in summary.json and exits 2 after the build steps; a failed step makes it exit 1.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
[ -x "$HERE/bin/multidecode" ] && ROOT=$HERE GPU_PACK=$HERE # (run from inside a pack)
W=$ROOT/build/gpu-run # every log and JSON; $OUT gets summary.json and results.tgz of W
OUT=${OUT:-$W}
BUDGET=${GPU_RUN_BUDGET:-450}
START=$(date +%s)
rm -rf "$W"
mkdir -p "$W" "$OUT"
M=${GPU_RUN_MODELS:-$ROOT/build/gpu-run-models} # made here, kept for a rerun: models/ does not travel
mkdir -p "$M"
STEPS=$W/steps.tsv
: >"$STEPS"
RC=0

left() { echo $((BUDGET - ($(date +%s) - START))); }

json_str() { # one line of text as a JSON string
    printf '"%s"' "$(printf '%s' "$1" | tr -d '\000-\037' | sed 's/\\/\\\\/g; s/"/\\"/g')"
}

summary() { # summary.json from steps.tsv (name, status, rc, seconds, note)
    {
        printf '{"commit": %s, "budget_s": %s, "elapsed_s": %s, "device": %s, "steps": [' \
            "$(json_str "$COMMIT")" "$BUDGET" $(($(date +%s) - START)) "$(json_str "$DEVICE")"
        sep=
        while IFS='	' read -r n st rc secs note; do
            printf '%s\n {"step": %s, "status": %s, "rc": %s, "seconds": %s, "note": %s}' "$sep" \
                "$(json_str "$n")" "$(json_str "$st")" "$rc" "$secs" "$(json_str "$note")"
            sep=,
        done <"$STEPS"
        printf '\n]}\n'
    } >"$W/summary.json.tmp" && mv "$W/summary.json.tmp" "$W/summary.json"
    [ "$OUT" = "$W" ] && return 0
    cp "$W/summary.json" "$OUT/summary.json.tmp" && mv "$OUT/summary.json.tmp" "$OUT/summary.json"
    tar czf "$OUT/results.tgz.tmp" -C "$W/.." "$(basename "$W")" && mv "$OUT/results.tgz.tmp" "$OUT/results.tgz"
}

record() { # NAME STATUS RC SECONDS NOTE
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$(printf '%s' "$5" | tr '\t\n' '  ')" >>"$STEPS"
    echo "gpu-run: $1: $2 ($4 s) $5"
    summary
}

# step NAME ESTIMATE_S LIMIT_S COMMAND...: runs COMMAND with stdout and stderr in
# build/gpu-run/NAME.log under timeout LIMIT_S (cut to what is left), when ESTIMATE_S still fits.
step() {
    name=$1 est=$2 lim=$3
    shift 3
    l=$(left)
    if [ "$l" -lt "$est" ]; then
        record "$name" skipped 0 0 "$l s left, needs about $est"
        return 1
    fi
    [ "$lim" -gt "$l" ] && lim=$l
    t0=$(date +%s)
    timeout -k 5 "$lim" "$@" >"$W/$name.log" 2>&1
    rc=$?
    st=ok
    [ $rc = 0 ] || { st=failed; [ $rc = 124 ] && st="timed out after $lim s"; RC=1; }
    tail -n 1 "$W/$name.log" | grep -Eq ' [1-9][0-9]* skipped$' && st="$st, with tests skipped"
    record "$name" "$st" "$rc" $(($(date +%s) - t0)) "$(tail -n 1 "$W/$name.log" 2>/dev/null)"
    return $rc
}

# ---- what runs: the pack, else a build here ----
COMMIT=$(cat "${GPU_PACK:-$ROOT/build/gpu-pack}/COMMIT" 2>/dev/null ||
    git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
DEVICE="(not yet known)"
PACK=${GPU_PACK:-$ROOT/build/gpu-pack}
if [ -x "$PACK/bin/multidecode" ]; then
    BIN=$PACK/bin TESTS=$PACK/tests
    export LD_LIBRARY_PATH="$PACK/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    [ -d "$PACK/fixtures" ] && export MD_SHARED="$PACK/fixtures"
    record build ok 0 0 "the pack in $PACK ($(du -sh "$PACK" | cut -f1))"
else
    BIN=$ROOT TESTS=$ROOT/build/cuda/tests
    step build 60 300 make -C "$ROOT" -j"$(nproc)" multidecode build/cuda/test_cuda_kernels \
        build/cuda/tests/test_cuda_backend build/cuda/tests/test_cuda_forest \
        build/cuda/tests/test_cuda_topk build/cuda/tests/test_cuda_graphs
    cp "$ROOT/build/cuda/test_cuda_kernels" "$TESTS/" 2>/dev/null
fi
# cuBLAS from the machine's CUDA: wherever its loader or a usual folder has it
if ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so\.13 '; then
    f=$(find /usr/local/cuda/lib64 /usr/local/cuda/targets /usr/lib /opt -name libcublas.so.13 2>/dev/null | head -n 1)
    [ -n "$f" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$(dirname "$f")"
fi
MD=$BIN/multidecode

# ---- 1. the device ----
if ! nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader \
    >"$W/device.txt" 2>&1 || [ ! -s "$W/device.txt" ]; then
    DEVICE="none"
    record device "no GPU" 2 0 "$(tail -n 1 "$W/device.txt" 2>/dev/null)"
    exit 2
fi
DEVICE=$(head -n 1 "$W/device.txt")
nvidia-smi >>"$W/device.txt" 2>&1
record device ok 0 0 "$DEVICE"

# ---- 2. the CUDA tests on the device ----
for t in test_cuda_kernels test_cuda_backend test_cuda_forest test_cuda_topk test_cuda_graphs; do
    step "$t" 10 120 "$TESTS/$t"
done
# (test_cuda_kernels times the few-row products on a GPU: weight GB/s, one row)
grep '^speed ' "$W/test_cuda_kernels.log" >"$W/product-speed.txt" 2>/dev/null &&
    record product-speed ok 0 0 "$(tr '\n' ';' <"$W/product-speed.txt")"

# ---- 3. exactness on a SmolLM2-shaped Q4_1 model ----
mkmodel() { # NAME ESTIMATE FILE MKMODEL-ARGS...: FILE made unless a former run made it
    name=$1 est=$2 f=$3
    shift 3
    [ -s "$f" ] && record "$name" ok 0 0 "$f kept from a former run" && return 0
    step "$name" "$est" 180 "$MD" mkmodel "$@" "${f%.gguf}.tmp.gguf" && mv "${f%.gguf}.tmp.gguf" "$f"
}
SMOL=$M/smollm2-shape-q4_1.gguf
mkmodel mkmodel-smollm2 5 "$SMOL" --vocab 49152 --embd 576 --layers 30 --heads 9 --kv-heads 3 \
    --ffn 1536 --ctx 8192 --type Q4_1
bench() { # NAME ESTIMATE LIMIT BENCH-ARGS...: JSON in NAME.json, stderr in NAME.log
    name=$1 est=$2 lim=$3
    shift 3
    step "$name" "$est" "$lim" sh -c '"$@" >"$0"' "$W/$name.json" "$MD" bench "$@"
}
# forest leaves against the same backend's one-at-a-time decoding: "same_tokens" in the JSON
bench forest-exact 15 90 forest -m "$SMOL" --backend cuda -p 300 -s 24 -k 1,4,16 --baseline-max-k 16
grep -q '"same_tokens": false' "$W/forest-exact.json" 2>/dev/null &&
    record forest-equals-linear FAILED 1 0 "a forest's tokens differ from linear decoding's" && RC=1
grep -q '"same_tokens": true' "$W/forest-exact.json" 2>/dev/null &&
    ! grep -q '"same_tokens": false' "$W/forest-exact.json" &&
    record forest-equals-linear ok 0 0 "every k: the same tokens as linear decoding on the device"
# greedy tokens and beam log-probabilities, cuda against ref (ref is slow: few tokens)
for be in cuda ref; do
    step "greedy-$be" 20 120 sh -c '"$0" generate -m "$1" --backend "$2" -t 8 --temp 0 -n 16 -q -p "The forest of" >"$3"' \
        "$MD" "$SMOL" "$be" "$W/greedy-$be.txt"
    step "beam-$be" 20 120 sh -c '"$0" beam -m "$1" --backend "$2" -t 8 -B 4 -n 4 -q --json -p "The forest of" >"$3"' \
        "$MD" "$SMOL" "$be" "$W/beam-$be.json"
done
if [ ! -s "$W/greedy-cuda.txt" ] || [ ! -s "$W/greedy-ref.txt" ]; then
    record greedy-vs-ref "not compared" 1 0 "a greedy run gave no text"
elif cmp -s "$W/greedy-cuda.txt" "$W/greedy-ref.txt"; then
    record greedy-vs-ref ok 0 0 "16 greedy tokens: the same text on cuda and ref"
else
    record greedy-vs-ref differs 1 0 "16 greedy tokens differ (near-ties of a random model, or a bug: see greedy-*.txt)"
fi
lp() { grep -o '"logprob": [-0-9.e]*' "$1" | cut -d' ' -f2; }
tk() { grep -o '"tokens": \[[0-9, ]*\]' "$1"; }
if [ ! -s "$W/beam-cuda.json" ] || [ ! -s "$W/beam-ref.json" ]; then
    record beam-vs-ref "not compared" 1 0 "a beam run gave no JSON"
elif [ "$(tk "$W/beam-cuda.json")" = "$(tk "$W/beam-ref.json")" ]; then
    lp "$W/beam-ref.json" >"$W/beam-ref.lp"
    d=$(lp "$W/beam-cuda.json" | paste - "$W/beam-ref.lp" |
        awk '{x = $1 - $2; if (x < 0) x = -x; if (x > m) m = x} END {printf "%.3g", m}')
    record beam-vs-ref ok 0 0 "the same 4 beams; max |logprob cuda - ref| = $d"
else
    record beam-vs-ref differs 1 0 "the beams' tokens differ (see beam-*.json)"
fi

# ---- 4. benches, cuda ----
bench decode-smollm2 10 60 decode -m "$SMOL" --backend cuda -t 1 -p 128 -n 128
bench ask-smollm2 60 180 ask -m "$SMOL" --backend cuda -p 4000 -N 1,4,16,64 -n 16 --no-copied
bench forest-smollm2 30 120 forest -m "$SMOL" --backend cuda -p 512 -s 16 -k 1,4,16,64,256 --baseline-max-k 4
B1=$M/1b-q4_k.gguf
mkmodel mkmodel-1b 20 "$B1" --preset 1b --type Q4_K --ctx 4096 &&
    bench decode-1b 15 60 decode -m "$B1" --backend cuda -t 1 -p 128 -n 128 &&
    bench prefill512-1b 10 60 decode -m "$B1" --backend cuda -t 1 -p 512 -n 8 &&
    bench prefill2048-1b 15 90 decode -m "$B1" --backend cuda -t 1 -p 2048 -n 8
if [ -n "${MD_SHARED:-}" ] && [ -r "$MD_SHARED/models/stories260K.gguf" ]; then
    bench decode-stories260K 5 30 decode -m "$MD_SHARED/models/stories260K.gguf" --backend cuda -t 1 -p 64 -n 128
fi
# 8B's layer shapes (8 of its 32 layers: the same products, a quarter of the bytes to write)
B8=$M/8b-shape-8-layers-q4_k.gguf
mkmodel mkmodel-8b-shape 60 "$B8" --vocab 128256 --embd 4096 --layers 8 --heads 32 --kv-heads 8 \
    --ffn 14336 --ctx 4096 --type Q4_K --untied &&
    bench decode-8b-shape 20 60 decode -m "$B8" --backend cuda -t 1 -p 128 -n 64

# ---- 5. compute-sanitizer on the tests, while time is left ----
if command -v compute-sanitizer >/dev/null 2>&1; then
    for tool in memcheck racecheck; do
        step "sanitizer-$tool-kernels" 60 150 env MD_NO_TIMING=1 compute-sanitizer --tool "$tool" \
            --error-exitcode 1 "$TESTS/test_cuda_kernels"
    done
    step sanitizer-memcheck-backend 60 150 compute-sanitizer --tool memcheck --error-exitcode 1 \
        "$TESTS/test_cuda_backend"
else
    record sanitizer skipped 0 0 "no compute-sanitizer on PATH"
fi
rm -f "$W/beam-ref.lp"
record done "$([ $RC = 0 ] && echo ok || echo 'some step failed')" $RC $(($(date +%s) - START)) ""
exit $RC
