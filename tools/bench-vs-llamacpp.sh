#!/bin/sh
# bench-vs-llamacpp.sh LLAMA_BIN MODEL... - multidecode against llama.cpp on the same GGUF
# files, side by side on this machine: decode, prefill, and forests of k leaves over a
# shared prompt against llama.cpp's batched decode of k streams (one unified KV cache,
# the prompt shared). The two programs take turns, ROUNDS times; the table keeps each
# one's fastest run (the machines here are noisy), and beside decode its share of the
# memory read probe run just before it (this VM's bandwidth swings from second to second,
# so a probe from another moment says little): the best share of the rounds. LLAMA_BIN
# holds llama-bench and llama-batched-bench (../shared/tools/build-llamacpp.sh DIR
# avx2|avx512 builds them; never commit them).
# To measure the AVX2 path on an AVX-512 machine, build multidecode with
# `make BUILD=build-v3 ARCH=-march=x86-64-v3` and pass MD=build-v3/multidecode, and
# llama.cpp with avx2.
#   env: MD (./multidecode), THREADS (2), ROUNDS (3), PREFILL (128), GEN (32),
#        CTX (256: the forests' shared prompt), STEPS (32: each leaf's tokens), KS ("16 64";
#        "none": no forests)
# Prints a Markdown table; the raw JSON of every run stays in $OUT (default a temp dir).
set -eu
llama=${1:?usage: bench-vs-llamacpp.sh LLAMA_BIN MODEL...}
shift
[ $# -ge 1 ] || { echo "bench-vs-llamacpp: name at least one GGUF model" >&2; exit 2; }
for b in llama-bench llama-batched-bench; do
    [ -x "$llama/$b" ] || { echo "bench-vs-llamacpp: no $llama/$b" >&2; exit 2; }
done
md=${MD:-./multidecode}
t=${THREADS:-2} rounds=${ROUNDS:-3} pp=${PREFILL:-128} tg=${GEN:-32}
ctx=${CTX:-256} steps=${STEPS:-32} ks=${KS:-16 64}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
kl=$(echo "$ks" | tr ' ' ',')
maxk=0
[ "$ks" = none ] || for k in $ks; do [ "$k" -gt "$maxk" ] && maxk=$k; done
i=0
while [ "$i" -lt "$rounds" ]; do
    i=$((i + 1))
    n=0
    for m in "$@"; do
        n=$((n + 1))
        "$md" bench memory -t "$t" --mib 1024 --passes 3 >"$out/mem.$n.$i.json"
        "$md" bench decode -m "$m" -p "$pp" -n "$tg" -t "$t" >"$out/md-decode.$n.$i.json"
        "$llama/llama-bench" -m "$m" -p "$pp" -n "$tg" -t "$t" -r 1 -o json >"$out/ll-decode.$n.$i.json" 2>/dev/null
        [ "$ks" = none ] && continue
        "$md" bench forest -m "$m" -t "$t" -p "$ctx" -s "$steps" -k "$kl" --no-sequential \
            --no-copied >"$out/md-forest.$n.$i.json"
        "$llama/llama-batched-bench" -m "$m" -t "$t" -c $((ctx + maxk * steps + 64)) -b 2048 -ub 512 \
            -npp "$ctx" -ntg "$steps" -npl "$kl" -pps -kvu --output-format jsonl \
            >"$out/ll-forest.$n.$i.jsonl" 2>/dev/null
    done
done
python3 - "$out" "$rounds" "$@" <<'PY'
import json, os, sys
out, rounds, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
def lines(name):
    try:
        with open(os.path.join(out, name)) as f:
            return [json.loads(l) for l in f if l.strip().startswith("{")]
    except (OSError, ValueError):
        return []
def best(vals):
    vals = [v for v in vals if v]
    return max(vals) if vals else None
def probe(n, i):
    return best(r["read_GBps"] for r in (load(f"mem.{n}.{i}.json") or {}).get("runs", []))
mems = [probe(n, i) for n in range(1, len(models) + 1) for i in range(1, rounds + 1)]
mems = [m for m in mems if m]
print(f"read probe (bench memory): {min(mems) if mems else '-'} .. {max(mems) if mems else '-'} GB/s\n")
print("| model | workload | multidecode | llama.cpp | ratio |")
print("|---|---|---:|---:|---:|")
def row(model, what, a, b, note=""):
    fa = f"{a:.1f}" if a else "-"
    fb = f"{b:.1f}" if b else "-"
    r = f"{a / b:.2f}x" if a and b else "-"
    print(f"| {model} | {what} | {fa}{note} | {fb} | {r} |")
for n, m in enumerate(models, 1):
    name = os.path.basename(m)
    md = [load(f"md-decode.{n}.{i}.json") for i in range(1, rounds + 1)]
    ll = [load(f"ll-decode.{n}.{i}.json") or [] for i in range(1, rounds + 1)]
    runs = [r for d in md if d for r in d["runs"]]
    pf = best(r["prompt_tok_s"] for r in runs)
    dec = best(r["gen_tok_s"] for r in runs)
    share = best(r["gen_weight_GBps"] / probe(n, i) for i, d in enumerate(md, 1) if d and probe(n, i)
                 for r in d["runs"])
    lpf = best(r["avg_ts"] for d in ll for r in d if r.get("n_prompt") and not r.get("n_gen"))
    ldec = best(r["avg_ts"] for d in ll for r in d if r.get("n_gen") and not r.get("n_prompt"))
    row(name, "prefill tok/s", pf, lpf)
    note = f" ({100 * share:.0f}% of the probe)" if share else ""
    row(name, "decode tok/s", dec, ldec, note)
    mf = [load(f"md-forest.{n}.{i}.json") for i in range(1, rounds + 1)]
    lf = [l for i in range(1, rounds + 1) for l in lines(f"ll-forest.{n}.{i}.jsonl")]
    for k in sorted({r["k"] for d in mf if d for r in d["runs"]}):
        a = best(r["forest"]["decode_tok_s"] for d in mf if d for r in d["runs"] if r["k"] == k)
        b = best(l.get("speed_tg") for l in lf if l.get("pl") == k)
        row(name, f"{k} leaves / streams, decode tok/s", a, b)
PY
echo "(raw runs: $out)" >&2
