#!/bin/sh
# fuzz-run.sh - runs one libFuzzer harness for a given time and prints one summary line.
#
#   sh tools/fuzz-run.sh NAME SECONDS
#
# Runs build/fuzz/bin/fuzz_NAME (make fuzz-build) on build/fuzz/corpus/NAME (new inputs
# are added there; make fuzz-seeds fills it) and the regression inputs of
# tests/fuzz/regress/NAME, with tests/fuzz/NAME.dict when there is one. The whole libFuzzer
# output, final statistics included, goes to build/fuzz/logs/NAME.log; a crashing input to
# build/fuzz/crashes/NAME/. FUZZ_FLAGS adds libFuzzer flags, e.g. to go on past known
# crashes: FUZZ_FLAGS="-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1".
# Exits 0 when the run found nothing, 1 when it found a crash, a leak, a timeout (an
# input running over 10 s) or an allocation over 2 GiB.
set -u
name=$1 secs=$2
dir=build/fuzz
bin=$dir/bin/fuzz_$name
log=$dir/logs/$name.log
[ -x "$bin" ] || { echo "fuzz-run: $bin is missing: run make fuzz-build" >&2; exit 2; }
mkdir -p "$dir/corpus/$name" "$dir/crashes/$name" "$dir/logs"
set --
[ -f "tests/fuzz/$name.dict" ] && set -- "$@" "-dict=tests/fuzz/$name.dict"
# inputs longer than the harnesses read are wasted mutations
case $name in
gguf) set -- "$@" -max_len=65536 ;;
session) set -- "$@" -max_len=16384 ;;
*) set -- "$@" -max_len=4096 ;;
esac
[ -d "tests/fuzz/regress/$name" ] && regress="tests/fuzz/regress/$name" || regress=
start=$(date +%s)
# shellcheck disable=SC2086 # FUZZ_FLAGS is a list of flags
"$bin" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$dir/crashes/$name/" "$@" ${FUZZ_FLAGS:-} \
    "$dir/corpus/$name" $regress >"$log" 2>&1
rc=$?
took=$(($(date +%s) - start))
# the last status line: "#N DONE cov: C ft: F corp: K/SIZE ... exec/s: E rss: R"
last=$(grep -a '^#[0-9]' "$log" | tail -n 1)
execs=$(printf '%s' "$last" | sed -n 's/^#\([0-9]*\).*/\1/p')
cov=$(printf '%s' "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
ft=$(printf '%s' "$last" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
corp=$(printf '%s' "$last" | sed -n 's/.*corp: \([0-9]*\).*/\1/p')
if [ "$rc" -eq 0 ]; then
    what=ok
else
    art=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    why=$(grep -a -m1 -o 'ERROR: [A-Za-z]*: [^(]*\|ERROR: libFuzzer: [a-z-]*\|fuzz invariant failed: .*' "$log")
    what="FOUND ${why:-exit $rc} -> ${art:-see $log}"
fi
echo "fuzz_$name: ${took}s, ${execs:-?} runs ($(( ${execs:-0} / (took > 0 ? took : 1) ))/s), cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}: $what"
[ "$rc" -eq 0 ]
