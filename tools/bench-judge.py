#!/usr/bin/env python3
"""Accuracy and wall time of cot (majority vote), cot with a judge-weighted vote, and tree
of thoughts on generated two-digit addition problems, at equal token budgets.

    python3 tools/bench-judge.py [--bin ./multidecode] [--model M] [--n 20] [--seed 1]

Problem i is "What is A + B?" with A, B drawn from 10..99 by a seeded generator (the
answer is known). cot: K chains of N tokens (K x N tokens at most) with the answer taken
as the last number of each chain; `multidecode judge -k K` grows the same chains and
judges them in one step, so its majority is cot's and its weighted vote weighs each chain
by P(yes) of its judge. tot: k thoughts per kept node, keep b, d levels, T tokens per
thought (k T + (d - 1) b k T tokens at most); its answer is the last number of the best
leaf. Prints one JSON object per method and a summary line each."""
import argparse
import json
import random
import subprocess
import time

PROMPT = "What is {a} + {b}? Think step by step, then give the final answer as a number."


def run(cmd):
    t0 = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.monotonic() - t0
    if out.returncode != 0:
        raise SystemExit("failed: %s\n%s" % (" ".join(cmd), out.stderr))
    return json.loads(out.stdout), dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="./multidecode")
    ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--chat-template", help="for a model file without one (Gemma 3 270M: gemma)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--chains", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--tot", default="3,2,3,16", help="k,b,d,tokens per thought")
    a = ap.parse_args()
    k, b, d, tt = (int(x) for x in a.tot.split(","))
    rng = random.Random(a.seed)
    probs = [(rng.randint(10, 99), rng.randint(10, 99)) for _ in range(a.n)]
    chat = ["--chat-template", a.chat_template] if a.chat_template else ["--chat"]
    base = [a.bin, None, "-m", a.model] + chat + ["--temp", "0.7", "--seed", "1", "-q", "--json",
            "--vote", "last-number"]
    res = {"cot_majority": [0, 0.0], "cot_judge_weighted": [0, 0.0], "tot": [0, 0.0]}
    for x, y in probs:
        want = str(x + y)
        p = PROMPT.format(a=x, b=y)
        cmd = base[:]
        cmd[1] = "cot"
        out, dt = run(cmd + ["-p", p, "-k", str(a.chains), "-n", str(a.tokens)])
        res["cot_majority"][0] += out["vote"]["answer"] == want
        res["cot_majority"][1] += dt
        cmd[1] = "judge"
        out, dt = run(cmd + ["-p", p, "-k", str(a.chains), "-n", str(a.tokens)])
        res["cot_judge_weighted"][0] += out["weighted_vote"]["answer"] == want
        res["cot_judge_weighted"][1] += dt
        cmd[1] = "tot"
        out, dt = run(cmd + ["-p", p, "-k", str(k), "-b", str(b), "-d", str(d), "-n", str(tt),
                             "--delim", "sentence"])
        res["tot"][0] += out["answer"] == want
        res["tot"][1] += dt
    budget = {"cot_majority": a.chains * a.tokens, "cot_judge_weighted": a.chains * a.tokens,
              "tot": k * tt + (d - 1) * b * k * tt}
    for name, (ok, t) in res.items():
        print(json.dumps({"method": name, "problems": a.n, "correct": ok, "accuracy": ok / a.n,
                          "wall_s": round(t, 2), "token_budget": budget[name]}))


if __name__ == "__main__":
    main()
