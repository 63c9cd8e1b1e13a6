#!/usr/bin/env python3
"""np_llama.py - a float32 Llama forward pass in numpy over a GGUF file's dequantised
weights (gguf-py), used only to calibrate the tolerances of tests/test_smollm2.c: it
replays tests/golden/smollm2_greedy.txt (teacher-forced on llama.cpp's tokens) with
activations kept in float, or with --q8 rounded to Q8 blocks before each quantised
matmul as llama.cpp and our cpu backend do, and prints how far its logits are from
llama.cpp's and whether its greedy picks agree. It is not a golden source itself.

Usage (from the repository root, in the oracle venv):
    python tests/oracle/np_llama.py [-m models/SmolLM2-135M-Instruct.Q4_1.gguf]
                                    [-g tests/golden/smollm2_greedy.txt] [--cases N] [--q8]
"""
import argparse

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def field(r, key):
    return r.fields[key].contents()


class Model:
    def __init__(self, path, q8=False):
        r = GGUFReader(path)
        self.q8 = q8
        self.types = {t.name: t.tensor_type.name for t in r.tensors}
        a = field(r, "general.architecture")
        self.n_layer = field(r, f"{a}.block_count")
        self.n_head = field(r, f"{a}.attention.head_count")
        self.n_head_kv = field(r, f"{a}.attention.head_count_kv")
        self.n_embd = field(r, f"{a}.embedding_length")
        self.eps = field(r, f"{a}.attention.layer_norm_rms_epsilon")
        self.base = field(r, f"{a}.rope.freq_base") if f"{a}.rope.freq_base" in r.fields else 1e4
        self.hd = self.n_embd // self.n_head
        self.w = {}
        for t in r.tensors:
            v = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
            self.w[t.name] = v.reshape([int(x) for x in reversed(t.shape)])  # (n_out, n_in)
        if "output.weight" not in self.w:
            self.w["output.weight"] = self.w["token_embd.weight"]
            self.types["output.weight"] = self.types["token_embd.weight"]

    def mm(self, x, name):
        """x @ W.T; with q8, x first rounded as llama.cpp's CPU backend rounds activations
        for quantised weights (Q8_0/Q8_1: int8 blocks of 32, fp16 scale amax / 127)."""
        w = self.w[name]
        if self.q8 and self.types[name] not in ("F32", "F16", "BF16"):
            b = x.reshape(x.shape[0], -1, 32)
            d = np.abs(b).max(-1, keepdims=True) / 127
            with np.errstate(divide="ignore", invalid="ignore"):
                q = np.where(d > 0, b / d, 0)
            q = np.trunc(q + np.copysign(0.5, q))  # roundf: half away from zero
            x = (q * d.astype(np.float16).astype(np.float32)).reshape(x.shape).astype(np.float32)
        return x @ w.T

    def rms(self, x, g):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * g

    def rope(self, x, pos):
        # llama.cpp "normal" rope: rotates adjacent pairs (2i, 2i+1) of each head
        n, h, d = x.shape
        inv = self.base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        ang = pos[:, None].astype(np.float64) * inv[None, :]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        y = np.empty_like(x)
        y[..., 0::2] = x0 * c - x1 * s
        y[..., 1::2] = x0 * s + x1 * c
        return y.astype(np.float32)

    def forward(self, tokens):
        """Logits (len(tokens), n_vocab) of a whole sequence from position 0."""
        w, n = self.w, len(tokens)
        pos = np.arange(n)
        x = w["token_embd.weight"][np.asarray(tokens)]
        mask = np.triu(np.full((n, n), -np.inf, dtype=np.float32), 1)
        g = self.n_head // self.n_head_kv
        for l in range(self.n_layer):
            p = f"blk.{l}."
            h = self.rms(x, w[p + "attn_norm.weight"])
            q = self.rope(self.mm(h, p + "attn_q.weight").reshape(n, self.n_head, self.hd), pos)
            k = self.rope(self.mm(h, p + "attn_k.weight").reshape(n, self.n_head_kv, self.hd), pos)
            v = self.mm(h, p + "attn_v.weight").reshape(n, self.n_head_kv, self.hd)
            k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
            s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(self.hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            o = np.einsum("hqk,khd->qhd", s, v).reshape(n, -1)
            x = x + self.mm(o, p + "attn_output.weight")
            h = self.rms(x, w[p + "ffn_norm.weight"])
            a = self.mm(h, p + "ffn_gate.weight")
            x = x + self.mm((a / (1 + np.exp(-a))) * self.mm(h, p + "ffn_up.weight"), p + "ffn_down.weight")
        return self.mm(self.rms(x, w["output_norm.weight"]), "output.weight")


def read_golden(path):
    cases, c = [], None
    for line in open(path, encoding="utf-8"):
        f = line.split()
        if not f or f[0].startswith("#"):
            continue
        if f[0] == "case":
            c = {"name": f[1] + "/" + f[2], "steps": []}
        elif f[0] == "prompt":
            c["prompt"] = [int(x) for x in f[2:]]
        elif f[0] == "gen":
            c["gen"] = [int(x) for x in f[3:]]
        elif f[0] == "step":
            c["steps"].append((int(f[2]), float(f[3]), int(f[4]), float(f[5])))
        elif f[0] == "end":
            cases.append(c)
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("-g", "--golden", default="tests/golden/smollm2_greedy.txt")
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--q8", action="store_true", help="round activations to Q8 like llama.cpp")
    args = ap.parse_args()
    m = Model(args.model, args.q8)
    worst_all, errs = 0.0, []
    for c in read_golden(args.golden)[:args.cases]:
        seq = c["prompt"] + c["gen"][:-1]
        logits = m.forward(seq)[len(c["prompt"]) - 1:]
        worst, same, tie = 0.0, 0, 0
        for i, (a, la, b, lb) in enumerate(c["steps"]):
            for t, want in ((a, la), (b, lb)):
                d = abs(float(logits[i, t]) - want)
                errs.append(d)
                worst = max(worst, d)
            ours = int(np.argmax(logits[i]))
            same += ours == a
            tie += ours != a and ours == b
        worst_all = max(worst_all, worst)
        print(f"{c['name']:20s} ids {same}/{len(c['steps'])} (runner-up {tie}), "
              f"max |dlogit| {worst:.4f}")
    e = np.array(errs)
    print(f"all: max {worst_all:.4f}, p99 {np.quantile(e, 0.99):.4f}, mean {e.mean():.4f}")


if __name__ == "__main__":
    main()
