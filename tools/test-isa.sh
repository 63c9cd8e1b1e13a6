#!/bin/sh
# test-isa.sh - `make test-isa`: the Makefile's ISA_TESTS (kernels against ref, the
# dequantiser goldens, quantised models against llama.cpp, forest exactness) built and run
# at each instruction-set level the CPU backend has a path for, each level in its own
# build folder build-isa/LEVEL:
#   scalar   the plain C fallback (-DSIMD_SCALAR) on baseline x86-64
#   v3       x86-64-v3: AVX2, FMA, F16C
#   v4       x86-64-v4: AVX-512 (and VNNI when the CPU has it); skipped on a CPU without
#            AVX-512, which cannot run it
#   vnni256  the AVX2 branches with 256-bit dpbusd (-DSIMD_256 on x86-64-v4 + VNNI): the
#            code AVX-VNNI chips run, whose VEX-encoded dpbusd neither an AVX-512 CPU nor
#            qemu has; only where the CPU has AVX-512 VNNI
#   aarch64  NEON (ARMv8.0: the Raspberry Pi 4's), cross-compiled with aarch64-linux-gnu-gcc,
#            run under qemu-aarch64 with the cross libc (tools/deps.sh isa installs both)
#   a64dot   NEON with the dot-product extension (ARMv8.2+: Apple's chips, the Pi 5):
#            its own int8 products, so test_simd and test_kernels only
# ISA_LEVELS="scalar v3" picks levels. Under qemu test_qmodels is not run (a third of the
# level's time; test_kernels checks the quantised products against ref there). test_forest
# runs --quick here: one seed per model, not the downloaded models (make test runs it in
# full at the native level). Prints each level's summary and time, then the summed
# "N passed, N failed, N skipped" last; exits non-zero when a level failed.
cd "$(dirname "$0")/.." || exit 1
P=0; F=0; S=0; rc=0
JOBS=${JOBS:-2}

# level NAME MAKE-ARGS...: build the level's tests, run them (through $RUNNER), add up
level() {
    name=$1; shift
    b=build-isa/$name
    t0=$(date +%s)
    echo "=== test-isa $name: $*"
    if ! make -s -j"$JOBS" BUILD="$b" "$@" isa-bins; then
        echo "!! test-isa $name: the build failed"; F=$((F + 1)); rc=1; return
    fi
    tests=$(make -s --no-print-directory BUILD="$b" "$@" print-isa-tests)
    set --
    for t in $tests; do
        case " $SKIP " in *" $t "*) echo "--- test-isa $name: $t not run here"; S=$((S + 1)); continue ;; esac
        case $t in test_forest) set -- "$@" "$b/isa/$t --quick" ;; *) set -- "$@" "$b/isa/$t" ;; esac
    done
    out=$(TEST_RUNNER="$RUNNER" sh tests/run.sh "$@" 2>&1); code=$?
    printf '%s\n' "$out" | sed '$d' | grep '^==\|^!!\|FAIL\|passed, '
    last=$(printf '%s\n' "$out" | tail -n 1)
    echo "--- test-isa $name: $last ($(($(date +%s) - t0)) s)"
    p=$(printf '%s' "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p')
    [ -n "$p" ] || p="0 1 0"
    set -- $p
    P=$((P + $1)); F=$((F + $2)); S=$((S + $3))
    [ "$code" -ne 0 ] && rc=1
}

for l in ${ISA_LEVELS:-scalar v3 v4 vnni256 aarch64 a64dot}; do
    RUNNER=""; SKIP=""
    case $l in
    scalar) level scalar ARCH=-march=x86-64 EXTRA_CFLAGS=-DSIMD_SCALAR CUDA=0 ;;
    v3) level v3 ARCH=-march=x86-64-v3 CUDA=0 ;;
    v4)
        if grep -q avx512f /proc/cpuinfo 2>/dev/null; then
            vnni=""; grep -q avx512_vnni /proc/cpuinfo && vnni=" -mavx512vnni"
            level v4 "ARCH=-march=x86-64-v4$vnni" CUDA=0
        else
            echo "--- test-isa v4: skipped (this CPU has no AVX-512)"; S=$((S + 1))
        fi ;;
    vnni256)
        if grep -q avx512_vnni /proc/cpuinfo 2>/dev/null; then
            level vnni256 "ARCH=-march=x86-64-v4 -mavx512vnni" EXTRA_CFLAGS=-DSIMD_256 CUDA=0
        else
            echo "--- test-isa vnni256: skipped (this CPU has no AVX-512 VNNI)"; S=$((S + 1))
        fi ;;
    aarch64)
        if command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && command -v qemu-aarch64 >/dev/null 2>&1; then
            RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
            SKIP=test_qmodels
            level aarch64 CC=aarch64-linux-gnu-gcc ARCH= CUDA=0
        else
            echo "!! test-isa aarch64: no aarch64-linux-gnu-gcc or qemu-aarch64 (sh tools/deps.sh isa)"
            F=$((F + 1)); rc=1
        fi ;;
    a64dot)
        RUNNER="qemu-aarch64 -cpu max -L /usr/aarch64-linux-gnu"
        level a64dot CC=aarch64-linux-gnu-gcc ARCH=-march=armv8.2-a+dotprod CUDA=0 \
            "ISA_TESTS=test_simd test_kernels" ;;
    *) echo "!! test-isa: unknown level $l"; F=$((F + 1)); rc=1 ;;
    esac
done
[ "$F" -ne 0 ] && rc=1
echo "$P passed, $F failed, $S skipped"
exit $rc
