#!/usr/bin/env python3
"""Equal-accuracy expansions and equal-expansion KL of a trained router against the
training-free one, from `spanscope-cli eval niah` rows (issue 8's second form of the target:
"at least 25 % fewer expansions at the same accuracy").

    python3 scripts/zoom-interp.py --training-free ROWS... --trained ROWS...

ROWS are .jsonl files (a header line, then one line per sample; a resumed run appends another
header line, which is skipped like the first). Rows are grouped by the
expand rate in their `settings`; within a rate every sample of every file is pooled. Every row
must be of one context length (`target_length`, tokens) and of the router its option names
(`router`); anything else is refused, since pooling it would be a silently wrong figure. For each
rate it prints the samples, accuracy (%, mean of `score`), mean expansions (spans per head and
query) and mean KL (nats, `fidelity.kl`) of both routers. Then, for each trained rate:

- the training-free router's expansions at the trained router's accuracy: its accuracy
  interpolated linearly in expansions between its rates, through (0 expansions, 0 %) below the
  lowest (n/a above the highest point, or where its accuracy does not rise), and the trained
  router's expansions relative to it (negative: fewer);
- the training-free router's KL at the trained router's expansions, interpolated log-log
  between its rates (extrapolated from the two nearest, and marked so, outside them), and the
  trained router's KL relative to it.

These are the interpolations of docs/sekv.md's runs 21-24.

Accuracy differences and their intervals come from spanscope-report (paired); this script does
the interpolations that it cannot (they pool across rates).
"""
import argparse
import json
import math
import re
import sys


def load(paths, router, lengths):
    groups = {}
    for path in paths:
        with open(path) as f:
            lines = [json.loads(l) for l in f if l.strip()]
        if not lines or "command" not in lines[0]:
            sys.exit(f"{path}: no header line")
        for row in lines[1:]:
            if "command" in row:  # the header of a resumed run
                continue
            if row.get("router") != router:
                sys.exit(f"{path}: a row of router {row.get('router')!r}, not {router!r}")
            lengths.add(row.get("target_length"))
            if len(lengths) > 1:
                sys.exit(f"{path}: rows of context lengths {sorted(lengths, key=str)}: one at a time")
            m = re.search(r"expand_rate=([0-9.]+)", row.get("settings", ""))
            if not m:
                sys.exit(f"{path}: a row without expand_rate in its settings")
            g = groups.setdefault(float(m.group(1)), {"score": [], "exp": [], "kl": []})
            g["score"].append(float(row["score"]))
            g["exp"].append(float(row["expansions"]))
            g["kl"].append(float(row["fidelity"]["kl"]))
    return {
        rate: {
            "n": len(g["score"]),
            "acc": 100.0 * sum(g["score"]) / len(g["score"]),
            "exp": sum(g["exp"]) / len(g["exp"]),
            "kl": sum(g["kl"]) / len(g["kl"]),
        }
        for rate, g in groups.items()
    }


def expansions_at_accuracy(points, acc):
    points = [{"acc": 0.0, "exp": 0.0}] + points
    for a, b in zip(points, points[1:]):
        if a["acc"] <= acc <= b["acc"] and b["acc"] > a["acc"]:
            t = (acc - a["acc"]) / (b["acc"] - a["acc"])
            return a["exp"] + t * (b["exp"] - a["exp"])
    return None


def kl_at_expansions(points, exp):
    if len(points) < 2:
        return None, False
    inside = points[0]["exp"] <= exp <= points[-1]["exp"]
    pair = next(((a, b) for a, b in zip(points, points[1:]) if a["exp"] <= exp <= b["exp"]), None)
    if pair is None:
        pair = (points[0], points[1]) if exp < points[0]["exp"] else (points[-2], points[-1])
    a, b = pair
    t = (math.log(exp) - math.log(a["exp"])) / (math.log(b["exp"]) - math.log(a["exp"]))
    return math.exp(math.log(a["kl"]) + t * (math.log(b["kl"]) - math.log(a["kl"]))), not inside


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--training-free", nargs="+", required=True, metavar="ROWS")
    ap.add_argument("--trained", nargs="+", required=True, metavar="ROWS")
    args = ap.parse_args()
    lengths = set()
    tf = load(args.training_free, "training-free", lengths)
    tr = load(args.trained, "trained", lengths)
    points = sorted(tf.values(), key=lambda p: p["exp"])
    print("rate      router         samples  accuracy  expansions  KL")
    for rate in sorted(set(tf) | set(tr)):
        for name, g in (("training-free", tf), ("trained", tr)):
            if rate in g:
                p = g[rate]
                print(f"{100 * rate:6.3f} %  {name:13s}  {p['n']:7d}  {p['acc']:6.1f} %  "
                      f"{p['exp']:10.2f}  {p['kl']:.4f}")
    print()
    for rate in sorted(tr):
        p = tr[rate]
        e = expansions_at_accuracy(points, p["acc"])
        k, extrapolated = kl_at_expansions(points, p["exp"])
        eq_exp = (f"training-free needs {e:.2f} expansions for {p['acc']:.1f} %: trained "
                  f"{100 * (p['exp'] / e - 1):+.1f} %") if e else \
            f"n/a ({p['acc']:.1f} % is outside the training-free points' accuracies)"
        eq_kl = (f"KL at equal expansions {100 * (p['kl'] / k - 1):+.1f} %"
                 f"{' (extrapolated)' if extrapolated else ''}") if k else "KL: n/a"
        print(f"{100 * rate:6.3f} %: {eq_exp}; {eq_kl}")


if __name__ == "__main__":
    main()
