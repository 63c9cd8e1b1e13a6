#!/bin/sh
# Decode benchmark on random-weight llamas from `multidecode mkmodel` (written once into
# build/bench-models/). Prints one JSON object per model on stdout.
#   sh tools/bench.sh [PRESET...]    default presets: 25m 110m; types: F16 Q8_0
set -eu
cd "$(dirname "$0")/.."
presets=${*:-25m 110m}
types=${TYPES:-F16 Q8_0}
mkdir -p build/bench-models
for p in $presets; do
    for t in $types; do
        f=build/bench-models/$p-$t.gguf
        [ -f "$f" ] || ./multidecode mkmodel --preset "$p" --type "$t" "$f"
        ./multidecode bench decode -m "$f" ${BENCH_ARGS:-}
    done
done
