#!/bin/sh
# Runs each test binary given, shows its output, and sums the "N passed, N failed[, N
# skipped]" lines they end with. Exits non-zero when any test failed or crashed. A program
# that checked nothing (0 passed, 0 failed) is named before the total: skipped entirely
# when it reported skips, a failure when it reported nothing at all. An argument may carry
# the test's own arguments ("build/tests/test_forest --seeds 1"); TEST_RUNNER, when set, is
# a command each test runs under (qemu-aarch64 -L ...).
P=0; F=0; S=0; rc=0; whole=""
for t in "$@"; do
    echo "== $t"
    out=$($TEST_RUNNER $t 2>&1); code=$?
    printf '%s\n' "$out" | tail -n 40
    last=$(printf '%s\n' "$out" | tail -n 1)
    p=$(printf '%s' "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1/p')
    f=$(printf '%s' "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\2/p')
    s=$(printf '%s' "$last" | sed -n 's/.*, \([0-9]*\) skipped$/\1/p')
    if [ -z "$p" ]; then
        echo "!! $t did not finish (exit $code)"; F=$((F + 1)); rc=1; continue
    fi
    P=$((P + p)); F=$((F + f)); S=$((S + ${s:-0}))
    [ "$code" -ne 0 ] && rc=1
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
        if [ "${s:-0}" -eq 0 ]; then echo "!! $t checked nothing"; F=$((F + 1)); rc=1
        else whole="$whole ${t##*/}"; fi
    fi
done
[ "$F" -ne 0 ] && rc=1
[ -n "$whole" ] && echo "skipped entirely:$whole"
echo "$P passed, $F failed, $S skipped"
exit $rc
