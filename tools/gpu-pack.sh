#!/bin/sh
# gpu-pack.sh - puts together and checks the folder a GPU machine runs from (make gpu-pack,
# make gpu-pack-check). That machine has no network, CUDA 13 with its libraries,
# and receives at most 64 MiB beside the working tree, so the pack holds:
#   bin/        the program and its CUDA plugin (sm_90), side by side as the program expects
#   tests/      the CUDA test programs, linked with the device build
#   lib/        every shared library the binaries need that is not glibc's, C++'s or CUDA's,
#               unpacked from this system's Debian packages (apt-get download + dpkg -x);
#               tools/gpu-run.sh puts it on LD_LIBRARY_PATH
#   fixtures/   stories260K (MD_SHARED for the tests), when this checkout has it
#   gpu-run.sh, COMMIT, MANIFEST (each file's size; the newest glibc symbol version needed)
#
#   sh tools/gpu-pack.sh build DIR BINARY...   (the binaries make gpu-pack built)
#   sh tools/gpu-pack.sh check DIR             (a copy of DIR alone: every library resolves
#                                               but the CUDA driver's and cuBLAS; no GPU run)
set -eu
LIMIT=$((64 << 20))
GLIBC_MAX=${GPU_PACK_GLIBC_MAX:-2.35} # Ubuntu 22.04's, the oldest base of CUDA 13 images
GLIBCXX_MAX=${GPU_PACK_GLIBCXX_MAX:-3.4.30} # gcc 12's libstdc++, Ubuntu 22.04's
# libraries the GPU machine has: glibc's; C++'s, which its nvcc needs (this system's would
# ask for a newer glibc: GLIBC_2.36); CUDA's (the driver, cuBLAS of its own CUDA 13)
SYSTEM='^(linux-vdso|libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcublas|libcublasLt)\.so'

die() { echo "gpu-pack: $*" >&2; exit 1; }

# The sonames ldd lists for the ELF files given, one per line, but the system's.
needed() { ldd "$@" 2>/dev/null | awk '$2 == "=>" {print $1}' | sort -u | grep -Ev "$SYSTEM" || true; }

# The newest symbol version of PREFIX (GLIBC, GLIBCXX) the files given ask for.
version_max() {
    p=$1
    shift
    objdump -T "$@" 2>/dev/null | grep -o "${p}_[0-9.]*" | sed "s/${p}_//" | sort -uV | tail -n 1
}

# Whether version $1 <= $2.
version_le() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -n 1)" = "$2" ]; }

# The Debian package that installed soname (merged /usr: either path).
package_of() {
    p=$(ldconfig -p | awk -v s="$1" '$1 == s {print $NF; exit}')
    [ -n "$p" ] || die "$1 is not installed here"
    r=$(readlink -f "$p")
    for f in "$r" "/usr$r" "${r#/usr}"; do
        pkg=$(dpkg -S "$f" 2>/dev/null | cut -d: -f1 | head -n 1)
        [ -n "$pkg" ] && echo "$pkg" && return 0
    done
    die "no Debian package owns $r"
}

build() {
    dir=$1
    shift
    root=$(cd "$(dirname "$0")/.." && pwd)
    rm -rf "$dir"
    mkdir -p "$dir/bin" "$dir/tests" "$dir/lib" "$dir/fixtures/models"
    for b in "$@"; do
        case $b in
        */multidecode-cuda.so) cp "$b" "$dir/bin/" ;; # (unstripped: the program checks its CRC)
        */multidecode) strip --strip-debug -o "$dir/bin/multidecode" "$b" ;;
        *) strip --strip-all -o "$dir/tests/$(basename "$b")" "$b" ;; # (the kernels keep their names in the cubins)
        esac
    done
    debs=$(mktemp -d)
    for so in $(needed "$dir"/bin/* "$dir"/tests/*); do
        pkg=$(package_of "$so")
        [ -d "$debs/$pkg" ] || (cd "$debs" && apt-get download "$pkg" >/dev/null 2>&1 &&
            dpkg -x "$pkg"_*.deb "$pkg") || die "apt-get download $pkg failed"
        f=$(find "$debs/$pkg" -name "$so" | head -n 1)
        [ -n "$f" ] || die "package $pkg has no $so"
        cp -L "$f" "$dir/lib/$so"
        echo "gpu-pack: lib/$so from $pkg"
    done
    rm -rf "$debs"
    shared=${MD_SHARED:-$root/../shared}
    [ -d "$shared" ] || shared=$root/shared
    if [ -r "$shared/models/stories260K.gguf" ]; then
        cp "$shared/models/stories260K.gguf" "$dir/fixtures/models/"
    else
        echo "gpu-pack: no stories260K fixture (MD_SHARED): its tests will skip there"
    fi
    cp "$root/tools/gpu-run.sh" "$dir/"
    git -C "$root" rev-parse --short HEAD >"$dir/COMMIT" 2>/dev/null || echo unknown >"$dir/COMMIT"
    git -C "$root" diff --quiet 2>/dev/null || sed -i 's/$/+changes/' "$dir/COMMIT"
    {
        echo "symbols up to GLIBC_$(version_max GLIBC "$dir"/bin/* "$dir"/tests/* "$dir"/lib/*)," \
            "GLIBCXX_$(version_max GLIBCXX "$dir"/bin/* "$dir"/tests/* "$dir"/lib/*)"
        (cd "$dir" && find . -type f -exec ls -l {} + | awk '{print $5, $NF}' | sort -k2)
    } >"$dir/MANIFEST"
    size=$(du -sb "$dir" | cut -f1)
    [ "$size" -le "$LIMIT" ] || die "$dir is $size bytes, over 64 MiB"
    echo "gpu-pack: $dir, $((size >> 20)) MiB: $(head -n 1 "$dir/MANIFEST")"
}

check() {
    [ -x "$1/bin/multidecode" ] || die "$1 holds no pack (make gpu-pack)"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cp -r "$1" "$tmp/pack"
    p=$tmp/pack fail=0
    elves="$p/bin/multidecode $p/bin/multidecode-cuda.so $p/tests/* $p/lib/*"
    # every library resolves, from the pack's lib/ unless the system's or CUDA's
    out=$(LD_LIBRARY_PATH=$p/lib ldd $elves 2>&1)
    bad=$(echo "$out" | awk -v p="$p/lib/" -v sys="$SYSTEM" '
        /^\// {f = $1}
        $2 == "=>" && $1 !~ sys && (index($3, p) != 1) {print f, $1, $3, $4}')
    [ -z "$bad" ] || { echo "gpu-pack check: not from the pack:"; echo "$bad"; fail=1; }
    echo "$out" | grep "not found" | grep -Ev "$SYSTEM" && fail=1
    readelf -d "$p/bin/multidecode-cuda.so" | grep -q 'NEEDED.*\[libcublas\.so\.13\]' ||
        { echo "gpu-pack check: the plugin does not ask for libcublas.so.13"; fail=1; }
    ls "$p/lib" | grep -q cublas && { echo "gpu-pack check: cuBLAS is packed"; fail=1; }
    g=$(version_max GLIBC $elves) gx=$(version_max GLIBCXX $elves)
    version_le "$g" "$GLIBC_MAX" || { echo "gpu-pack check: needs GLIBC_$g, newer than $GLIBC_MAX"; fail=1; }
    version_le "$gx" "$GLIBCXX_MAX" ||
        { echo "gpu-pack check: needs GLIBCXX_$gx, newer than $GLIBCXX_MAX"; fail=1; }
    size=$(du -sb "$p" | cut -f1)
    [ "$size" -le "$LIMIT" ] || { echo "gpu-pack check: $size bytes, over 64 MiB"; fail=1; }
    # the program runs from the copy alone, and the run script stops at "no GPU" here
    LD_LIBRARY_PATH=$p/lib "$p/bin/multidecode" --version >/dev/null ||
        { echo "gpu-pack check: the packed program does not start"; fail=1; }
    if ! nvidia-smi -L >/dev/null 2>&1; then
        rc=0
        OUT=$tmp/out GPU_RUN_MODELS=$tmp/models sh "$p/gpu-run.sh" >"$tmp/run.log" 2>&1 || rc=$?
        grep -q '"status": "no GPU"' "$tmp/out/summary.json" 2>/dev/null && [ $rc = 2 ] ||
            { echo "gpu-pack check: gpu-run.sh without a GPU: exit $rc"; cat "$tmp/run.log"; fail=1; }
    fi
    [ $fail = 0 ] || die "check of $1 FAILED"
    echo "gpu-pack check: ok ($((size >> 20)) MiB, GLIBC up to $g, GLIBCXX up to $gx, libcublas.so.13 from the machine)"
}

case ${1:-} in
build) shift; [ $# -ge 2 ] || die "usage: gpu-pack.sh build DIR BINARY..."; build "$@" ;;
check) [ $# = 2 ] || die "usage: gpu-pack.sh check DIR"; check "$2" ;;
*) die "usage: gpu-pack.sh build DIR BINARY... | check DIR" ;;
esac
