#!/usr/bin/env python3
"""gen_dequant_golden.py - writes tests/golden/dequant.txt: blocks of random but valid
bytes for each GGUF weight type, and the float32 values that gguf-py (llama.cpp's own
Python library, gguf.quants) dequantises them to. tests/test_dequant_golden.c checks
kernels/dtype.c against it, so our dequantisers are compared with an implementation
nobody here wrote.

"Valid" means every fp16 scale/min field holds a finite value of a weight-like magnitude
(random sign, 2^-12 .. 2^-3); all other bytes (quants, high bits, K-quant 4- and 6-bit
scale bytes, Q6_K int8 scales, MXFP4's e8m0 exponents) are uniformly random, so every bit of the layout is exercised.
The output is deterministic for a given seed and gguf/numpy version.

Usage (from the repository root, in the oracle venv, see tests/oracle/README.md):
    python tests/oracle/gen_dequant_golden.py [-o tests/golden/dequant.txt]
"""
import argparse
import datetime
import sys
from importlib.metadata import version as pkg_version

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

SEED = 20250101

# type -> (number of blocks, byte offsets of the fp16 fields that must be finite)
TYPES = [
    (T.Q4_0, 4, [0]),
    (T.Q4_1, 4, [0, 2]),
    (T.Q5_0, 4, [0]),
    (T.Q5_1, 4, [0, 2]),
    (T.Q8_0, 4, [0]),
    (T.Q4_K, 2, [0, 2]),
    (T.Q5_K, 2, [0, 2]),
    (T.Q6_K, 2, [208]),
]

# the quant types big models ship in; after F16 and BF16, so the cases above keep their
# bytes (MXFP4's one scale byte is an e8m0 exponent: any byte is valid)
MORE_TYPES = [
    (T.Q2_K, 2, [80, 82]),
    (T.Q3_K, 2, [108]),
    (T.IQ4_NL, 4, [0]),
    (T.IQ4_XS, 2, [0]),
    (T.MXFP4, 4, []),
]


def rand_fp16_scales(rng, n):
    """n finite fp16 values, random sign, magnitude 2^-12 .. 2^-3 (log-uniform)."""
    mag = np.exp2(rng.uniform(-12.0, -3.0, n))
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (sign * mag).astype(np.float16)


def quant_blocks(rng, qtype, n_blocks, f16_offsets):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for off in f16_offsets:
        raw[:, off:off + 2] = rand_fp16_scales(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    return raw.reshape(-1), n_blocks * block


def f16_values(rng):
    """64 fp16 values: normals of several scales plus zeros, subnormals and extremes."""
    v = (rng.standard_normal(56) * np.exp2(rng.integers(-14, 8, 56))).astype(np.float16)
    special = np.array([0.0, -0.0, 6.0e-8, -5.96e-8, 6.1e-5, 65504.0, -65504.0, 1.0],
                       dtype=np.float16)
    return np.concatenate([v, special]).view(np.uint8), 64


def bf16_values(rng):
    """64 bf16 values (the top halves of float32s), plus zeros and a subnormal."""
    f = (rng.standard_normal(58) * np.exp2(rng.integers(-40, 40, 58))).astype(np.float32)
    f = np.concatenate([f, np.array([0.0, -0.0, 1e-39, -3.0e38, 1.0, -2.5], np.float32)])
    bits = (f.view(np.uint32) >> 16).astype(np.uint16)
    return bits.view(np.uint8), 64


def emit(out, name, data, n, values):
    assert values.dtype == np.float32 and values.size == n
    out.write(f"type {name} {n} {data.size}\n")
    hexs = data.tobytes().hex()
    for i in range(0, len(hexs), 64):
        out.write(hexs[i:i + 64] + "\n")
    vals = [format(float(x), ".9g") for x in values.reshape(-1)]
    for i in range(0, len(vals), 8):
        out.write(" ".join(vals[i:i + 8]) + "\n")
    out.write("end\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--out", default="tests/golden/dequant.txt")
    args = ap.parse_args()
    rng = np.random.default_rng(SEED)
    with open(args.out, "w") as out:
        out.write(
            "# dequant.txt - dequantisation goldens from gguf-py (llama.cpp's Python library).\n"
            f"# source: gguf.quants.dequantize, gguf {pkg_version('gguf')}, "
            f"numpy {np.__version__}, python {sys.version.split()[0]}\n"
            f"# generated: {datetime.date.today().isoformat()} by "
            "python tests/oracle/gen_dequant_golden.py (seed %d)\n" % SEED +
            "# format, repeated per case:\n"
            "#   type NAME N_VALUES N_BYTES\n"
            "#   the N_BYTES block bytes as hex, 32 bytes a line\n"
            "#   the N_VALUES float32 values, %.9g (round-trips float32), 8 a line\n"
            "#   end\n")
        for qtype, n_blocks, offs in TYPES:
            data, n = quant_blocks(rng, qtype, n_blocks, offs)
            emit(out, qtype.name, data, n, np.asarray(dequantize(data, qtype), np.float32))
        for qtype, make in ((T.F16, f16_values), (T.BF16, bf16_values)):
            data, n = make(rng)
            emit(out, qtype.name, data, n, np.asarray(dequantize(data, qtype), np.float32))
        for qtype, n_blocks, offs in MORE_TYPES:
            data, n = quant_blocks(rng, qtype, n_blocks, offs)
            emit(out, qtype.name, data, n, np.asarray(dequantize(data, qtype), np.float32))


if __name__ == "__main__":
    main()
