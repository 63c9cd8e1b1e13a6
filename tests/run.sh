#!/bin/sh
# Runs the test binaries given, TEST_JOBS at a time (default: the machine's cores), then
# shows each one's output in the order given with its time, and sums the "N passed, N
# failed[, N skipped]" lines they end with. Exits non-zero when any test failed or crashed.
# A program that checked nothing (0 passed, 0 failed) is named before the total: skipped
# entirely when it reported skips, a failure when it reported nothing at all. An argument
# may carry the test's own arguments ("build/tests/test_forest --seeds 1"); TEST_RUNNER,
# when set, is a command each test runs under (qemu-aarch64 -L ...).
J=${TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT INT TERM

# One test "N CMD": its output, exit status and seconds into $dir/N.{out,rc,time}.
ONE='n=${1%% *}; t=${1#* }; s=$(date +%s.%N)
$TEST_RUNNER $t >"$dir/$n.out" 2>&1
echo $? >"$dir/$n.rc"
echo "$s $(date +%s.%N)" | awk "{ printf \"%.1f\", \$2 - \$1 }" >"$dir/$n.time"'
export dir TEST_RUNNER

# The slowest of the last run first (its times are kept in $TIMES, "SECONDS<tab>TEST" a
# line), so that a long test does not start last; the output below keeps the order given.
TIMES=${BUILD:-build}/test-times
i=0
for t in "$@"; do
    i=$((i + 1))
    secs=$(awk -F'\t' -v t="$t" '$2 == t { print $1; exit }' "$TIMES" 2>/dev/null)
    printf '%s %s %s\n' "${secs:-1e9}" "$i" "$t"
done | sort -g -r -k1,1 | cut -d' ' -f2- | xargs -d '\n' -P "$J" -I{} sh -c "$ONE" sh {}

P=0; F=0; S=0; rc=0; whole=""; i=0
: >"$TIMES.new" 2>/dev/null
for t in "$@"; do
    i=$((i + 1))
    code=$(cat "$dir/$i.rc"); out=$(cat "$dir/$i.out"); secs=$(cat "$dir/$i.time")
    echo "== $t ($secs s)"
    printf '%s\t%s\n' "$secs" "$t" >>"$TIMES.new" 2>/dev/null
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
mv -f "$TIMES.new" "$TIMES" 2>/dev/null
[ "$F" -ne 0 ] && rc=1
[ -n "$whole" ] && echo "skipped entirely:$whole"
echo "$P passed, $F failed, $S skipped"
exit $rc
