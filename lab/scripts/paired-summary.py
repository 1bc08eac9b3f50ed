#!/usr/bin/env python3
"""Paired comparison of sekv against full from `spanscope-lab eval` result lines.

Usage: paired-summary.py --full FULL.jsonl [--full ...] --sekv SEKV.jsonl [--sekv ...]

Lines are matched by (task, target_length, index): a sample's `full` line from the --full files,
its `sekv` line from the --sekv files (the last one read wins where a file holds a sample twice).
For each task and length, and pooled over all of them, it prints the number of pairs, both
accuracies, the mean paired difference sekv − full in points with its normal 95 % interval
(mean ± 1.96 · s / √n, s the sample standard deviation of the differences), the number of
pairs whose scores differ, the mean KL against full (nats per token), the median and maximum
over samples of `expanded_share_median`, the needle's best span in the top three by attention
mass among the needle samples sekv answered fully right (`needle_mass.top3`; it ranks the first
asked needle only), and the mean and maximum total memory (fast + host tier) over `full_kv_bytes`.
"""
import argparse
import json
import math
import statistics


def read(paths, policy):
    out = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.startswith("{"):
                    continue
                r = json.loads(line)
                if r.get("policy") != policy:
                    continue
                out[(r["task"], r["target_length"], r["index"])] = r
    return out


def interval(d):
    n = len(d)
    m = statistics.mean(d)
    half = 1.96 * statistics.stdev(d) / math.sqrt(n) if n > 1 else float("nan")
    return m, m - half, m + half


def summary(label, keys, full, sekv):
    d = [100 * (sekv[k]["score"] - full[k]["score"]) for k in keys]
    m, lo, hi = interval(d)
    acc_f = 100 * statistics.mean(full[k]["score"] for k in keys)
    acc_s = 100 * statistics.mean(sekv[k]["score"] for k in keys)
    differ = sum(1 for x in d if x != 0)
    kl = [sekv[k]["fidelity"]["kl"] for k in keys if "fidelity" in sekv[k]]
    share = [sekv[k]["expanded_share_median"] for k in keys
             if sekv[k].get("expanded_share_median") is not None]
    top3 = [sekv[k]["needle_mass"]["top3"] for k in keys
            if sekv[k]["score"] == 1.0 and sekv[k].get("needle_mass")
            and sekv[k]["needle_mass"].get("top3") is not None]
    mem = [(sekv[k]["memory"]["fast_tier_bytes"] + sekv[k]["memory"]["host_tier_bytes"]) /
           sekv[k]["memory"]["full_kv_bytes"] for k in keys]
    text = (f"{label:<18} n {len(keys):>3}  full {acc_f:5.1f} %  sekv {acc_s:5.1f} %  "
            f"Δ {m:+5.1f} [{lo:+5.1f}, {hi:+5.1f}]  differ {differ:>2}")
    if kl:
        text += f"  KL {statistics.mean(kl):.4f}"
    if share:
        text += f"  expanded {100 * statistics.median(share):.1f} % (max {100 * max(share):.1f} %)"
    if top3:
        text += f"  top3 {sum(top3)}/{len(top3)}"
    text += f"  memory {100 * statistics.mean(mem):.1f} % (max {100 * max(mem):.1f} %)"
    whole = [sekv[k]["cache_fraction"] for k in keys if "cache_fraction" in sekv[k]]
    if whole:
        text += f"  whole cache {100 * statistics.mean(whole):.1f} %"
    print(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--full", action="append", required=True)
    ap.add_argument("--sekv", action="append", required=True)
    a = ap.parse_args()
    full, sekv = read(a.full, "full"), read(a.sekv, "sekv")
    keys = sorted(set(full) & set(sekv))
    if not keys:
        raise SystemExit("no sample has both a full and a sekv line")
    for group in sorted({k[:2] for k in keys}):
        summary(f"{group[0]} {group[1]}", [k for k in keys if k[:2] == group], full, sekv)
    summary("pooled", keys, full, sekv)


if __name__ == "__main__":
    main()
