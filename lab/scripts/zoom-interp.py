#!/usr/bin/env python3
"""Equal-accuracy expansions and equal-expansion KL of a trained router against the
training-free one, from `spanscope-lab eval niah` rows (issue 8's second form of the target:
"at least 25 % fewer expansions at the same accuracy").

    python3 lab/scripts/zoom-interp.py --training-free ROWS... --trained ROWS...

ROWS are .jsonl files (a header line, then one line per sample; a resumed run appends another
header line, which must repeat the first's options and commit). Rows are grouped by the expand
rate in their `settings`; within a rate every sample of every file is pooled. Anything whose
pooling would be a silently wrong figure is refused: rows of another router than the option
names (`router`), of more than one task, haystack, budget, τ rule or context length
(`target_length`, tokens), the same sample twice (router, rate, seed, index, length, depth), and
trained rows of more than one parameter file (`zoom_digest`) unless --pool-digests is given. For each
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


def header_key(header):
    """A header's command without the program and --out, and its commit."""
    words = header["command"].split()[1:]
    if "--out" in words:
        i = words.index("--out")
        del words[i:i + 2]
    return " ".join(words), header.get("commit")


def load(paths, router, common, seen, digests):
    groups = {}
    for path in paths:
        with open(path) as f:
            lines = [json.loads(l) for l in f if l.strip()]
        if not lines or "command" not in lines[0]:
            sys.exit(f"{path}: no header line")
        first = header_key(lines[0])
        for row in lines[1:]:
            if "command" in row:  # the header of a resumed run
                if header_key(row) != first:
                    sys.exit(f"{path}: a resumed run's header differs from the first "
                             f"(options or commit): not one row")
                continue
            if row.get("router") != router:
                sys.exit(f"{path}: a row of router {row.get('router')!r}, not {router!r}")
            for field in ("task", "haystack", "budget", "tau", "target_length"):
                common.setdefault(field, (row.get(field), path))
                if row.get(field) != common[field][0]:
                    sys.exit(f"{path}: {field} {row.get(field)!r}, but {common[field][1]} has "
                             f"{common[field][0]!r}: one at a time")
            m = re.search(r"expand_rate=([0-9.]+)", row.get("settings", ""))
            if not m:
                sys.exit(f"{path}: a row without expand_rate in its settings")
            rate = float(m.group(1))
            key = (router, rate, row.get("seed"), row.get("index"), row.get("target_length"),
                   row.get("depth"))
            if key in seen:
                sys.exit(f"{path}: sample {key} is already in {seen[key]}: counted twice")
            seen[key] = path
            if router == "trained":
                digests.add(row.get("zoom_digest"))
            g = groups.setdefault(rate, {"score": [], "exp": [], "kl": []})
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
    ap.add_argument("--pool-digests", action="store_true",
                    help="pool trained rows of several parameter files (say so with the figure)")
    args = ap.parse_args()
    common, seen, digests = {}, {}, set()
    tf = load(args.training_free, "training-free", common, seen, digests)
    tr = load(args.trained, "trained", common, seen, digests)
    if len(digests) > 1 and not args.pool_digests:
        sys.exit(f"trained rows of {len(digests)} parameter files {sorted(digests, key=str)}: "
                 "one at a time, or --pool-digests")
    points = sorted(tf.values(), key=lambda p: p["exp"])
    if len(digests) > 1:
        print(f"trained rows of {len(digests)} parameter files pooled: {sorted(digests, key=str)}")
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
