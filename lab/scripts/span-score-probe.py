#!/usr/bin/env python3
"""How much of the oracle's attention mass do cheap per-span scores pick? (docs/sekv.md,
"What a span's score can see").

    python3 -m venv /tmp/probe && /tmp/probe/bin/pip install gguf numpy
    /tmp/probe/bin/python lab/scripts/span-score-probe.py --every 4 RECORDS_DIR

Reads zoom recordings (spanscope-lab zoom-record; lab/router/zoom_record.h): per recorded query,
SEKV layer and query head, the query q [head_dim], the keys k [n_tokens][n_kv_head][head_dim] and
the teacher's attention mass on each span. For each score below it ranks the spans the query
sees, takes the top k, and divides the teacher's mass on them by the mass on the k spans with
the most mass (the oracle's choice; 1 = as good as the oracle). Prints the mean over all
queries and heads (each query head alone, not the KV group's union), for k = 1, 2, 4, 8, and
the fast-tier rows one span would cost per KV head (a row = one key and one value, 2·head_dim
floats). The summary row costs 1; a score that reads the plain mean k̃ takes it as the summary
row's key (which that row's attention also reads), or pays 0.5 more to keep it beside k̄; the
sketch keeps k̄ and stores its own correction, as span_sketch.h does. z_i = s q·k_i, s the
layer's scale:

  summary   s q·k̄ + log|S|, k̄ the surprisal-weighted summary key (the training-free router)
  mean      s q·k̃ + log|S|, k̃ the span's plain mean key
  gauss     mean + ½ Var_i(z_i): the second-order cumulant of log Σ_i exp(z_i) (span_sketch.h)
  sketchM   summary + s (Uq)·δ + ½ Var_i(s (Uq)·(U k_i)), δ = U(k̃ − k̄), U the M leading
            eigenvectors of the queries' second moment: span_sketch.h's key sketch of M vectors
  far       log(exp(z_far) + (|S|−1) exp(s q·k̃)), k_far the key furthest from k̃
  keptJ     log(Σ_{i∈K} exp(z_i) + (|S|−J) exp(s q·k̃)), K the J keys of most expected attention
            under the queries (E exp(s q·k) for Gaussian queries of their mean and covariance):
            J keys kept at full resolution, picked without the query at hand
  bound     s Σ_j max(q_j lo_j, q_j hi_j), lo and hi the elementwise minimum and maximum of the
            span's keys: an upper bound of max_i z_i (Quest, Tang et al., ICML 2024, §3.2)
  boundM    s q·k̃ + s Σ_j max(u_j lo_j, u_j hi_j), u = U q, lo and hi the elementwise extremes
            of U(k_i − k̃): the same bound in the sketch's basis, around the mean
  sign1     log Σ_i exp(ẑ_i), ẑ_i = s q·(k̃ + α_i sign(k_i − k̃)), α_i the mean |k_i − k̃|: one bit a
            key entry and one float a key
  max       max_i z_i: reads every key, a bound on what one key's score tells

The queries' statistics (the basis U, their mean and covariance) are fitted on the queries of the
other recordings read, never on the recording scored. Only queries that see 10 spans or more
count. Then, for the span of most mass, the share of its mass on its one largest key. The spans
are the recording's; a score that costs more rows would, at an equal fast-tier budget,
get fewer and longer spans, which this probe does not model.
"""
import argparse
import glob
import os
import sys

try:
    import gguf
    import numpy as np
except ImportError as e:
    sys.exit(f"{e}: this script needs the PyPI packages gguf and numpy (see its docstring)")

KS = (1, 2, 4, 8)


def field(reader, key):
    f = reader.fields.get("spanscope.zoom_record." + key)
    if f is None:
        raise ValueError(f"no field {key}")
    if not f.data:  # an empty array, e.g. the query positions of a document too short for any
        return np.array([])
    return np.array([f.parts[i][0] for i in f.data]) if len(f.data) > 1 else f.parts[f.data[0]]


def lse(values):
    """log Σ exp(values), stable."""
    v = np.asarray(values, dtype=np.float64)
    m = v.max()
    return m + np.log(np.exp(v - m).sum())


def summary_weights(sur):
    """span_factors.h span_weights: w_i = s_i / Σ s over a span's surprisals s [n] (nats; NaN or
    negative counted as 0), uniform (1/n) when every s_i is 0."""
    w = np.where(np.isfinite(sur) & (sur > 0), sur, 0.0)
    return w / w.sum() if w.sum() > 0 else np.full(len(sur), 1.0 / len(sur))


def expected_attention(ks, scale, muq, covq):
    """log E exp(s q·k_i) for each key of ks [n][d] under Gaussian queries of mean muq [d] and
    covariance covq [d][d]: s q̄·k + ½ s² kᵀΣk (the log-normal mean)."""
    return scale * ks @ muq + 0.5 * scale**2 * np.einsum("id,de,ie->i", ks, covq, ks)


def query_sums(path):
    """Per (layer, KV head): (count, Σ q [d], Σ qqᵀ [d][d]) of the recording's queries."""
    r = gguf.GGUFReader(path)
    t = {x.name: x for x in r.tensors}
    sums = {}
    for layer in np.atleast_1d(field(r, "layers")).astype(int):
        if len(np.atleast_1d(field(r, "query_pos"))) == 0:
            return {}
        q = np.array(t[f"layer.{layer}.q"].data).astype(np.float64)
        n_kv = np.array(t[f"layer.{layer}.k"].data).shape[1]
        if q.ndim != 3 or q.shape[1] % n_kv:
            raise ValueError(f"layer {layer}: queries of shape {q.shape} over {n_kv} KV heads")
        group = q.shape[1] // n_kv
        for g in range(n_kv):
            qg = q[:, g * group:(g + 1) * group].reshape(-1, q.shape[2])
            sums[(layer, g)] = (len(qg), qg.sum(0), qg.T @ qg)
    return sums


def probe(path, scores, acc, stats):
    """stats: (layer, KV head) -> (count, Σ q, Σ qqᵀ) of the other recordings' queries."""
    r = gguf.GGUFReader(path)
    begin = np.atleast_1d(field(r, "spans.begin")).astype(int)
    end = np.atleast_1d(field(r, "spans.end")).astype(int)
    qpos = np.atleast_1d(field(r, "query_pos")).astype(int)
    if len(qpos) == 0:
        return None  # a document too short for the first query position
    tail = int(field(r, "tail")[0])
    layers = np.atleast_1d(field(r, "layers")).astype(int)
    head_dim = int(field(r, f"layer.{layers[0]}.head_dim")[0])
    t = {x.name: np.array(x.data) for x in r.tensors}
    sur = t["token_surprisal"].astype(np.float64)
    for layer in layers:
        k = t[f"layer.{layer}.k"].astype(np.float64)  # [n][n_kv][d]
        q = t[f"layer.{layer}.q"].astype(np.float64)  # [nq][h][d]
        mass = t[f"layer.{layer}.span_mass"].astype(np.float64)  # [nq][h][ns]
        scale = float(field(r, f"layer.{layer}.scale")[0])
        n_head, n_kv = q.shape[1], k.shape[1]
        if n_head % n_kv:
            raise ValueError(f"{path}: {n_head} query heads over {n_kv} KV heads")
        group = n_head // n_kv
        span = {}  # (g, s): what each score keeps of span s for KV head g, query-independent
        for g in range(n_kv):
            count, qsum, qq2 = stats[(layer, g)]
            _, vec = np.linalg.eigh(qq2)
            bases = {m: vec[:, ::-1][:, :m].T for m in (16, 32)}
            muq = qsum / count
            covq = qq2 / count - np.outer(muq, muq)
            for s in range(len(begin)):
                ks = k[begin[s]:end[s], g]
                w = summary_weights(sur[begin[s]:end[s]])
                mean = ks.mean(0)
                c = ks - mean
                e = expected_attention(ks, scale, muq, covq)
                x = {"ks": ks, "n": len(ks), "kbar": w @ ks, "mean": mean,
                     "far": ks[np.argmax(np.linalg.norm(c, axis=1))], "kept": ks[np.argsort(-e)[:2]],
                     "sign": mean + np.abs(c).mean(1, keepdims=True) * np.sign(c),
                     "lo": ks.min(0), "hi": ks.max(0)}
                for m, u in bases.items():
                    cu = c @ u.T  # [n][m]
                    x[m] = (u, ks @ u.T, cu.min(0), cu.max(0), u @ (mean - x["kbar"]))
                span[(g, s)] = x
        for i, p in enumerate(qpos):
            vis = np.nonzero(end <= p - tail)[0]
            if len(vis) < 10:
                continue
            for h in range(n_head):
                g = h // group
                qq = q[i, h]
                sc = {name: np.full(len(begin), -np.inf) for name in scores}
                for s in vis:
                    x = span[(g, s)]
                    n = x["n"]
                    z = scale * x["ks"] @ qq
                    mean = scale * x["mean"] @ qq
                    sc["summary"][s] = scale * x["kbar"] @ qq + np.log(n)
                    sc["mean"][s] = mean + np.log(n)
                    sc["gauss"][s] = mean + np.log(n) + 0.5 * z.var()
                    for m in (16, 32):
                        u, ku, lo, hi, delta = x[m]
                        uq = u @ qq
                        sc[f"sketch{m}"][s] = (sc["summary"][s] + scale * uq @ delta +
                                               0.5 * (scale * ku @ uq).var())
                        sc[f"bound{m}"][s] = mean + scale * np.maximum(uq * lo, uq * hi).sum()
                    rest = [mean + np.log(n - j) for j in (1, 2) if n > j]
                    sc["far"][s] = lse([scale * x["far"] @ qq] + rest[:1])
                    sc["kept1"][s] = lse([scale * x["kept"][0] @ qq] + rest[:1])
                    sc["kept2"][s] = lse(list(scale * x["kept"] @ qq) + rest[1:2])
                    sc["sign1"][s] = lse(scale * x["sign"] @ qq)
                    sc["bound"][s] = scale * np.maximum(qq * x["lo"], qq * x["hi"]).sum()
                    sc["max"][s] = z.max()
                best = np.sort(mass[i, h])[::-1]
                top1 = int(np.argmax(mass[i, h]))
                z1 = scale * k[begin[top1]:end[top1], g] @ qq
                acc.setdefault("one_key", []).append(1.0 / np.exp(z1 - z1.max()).sum())
                for name, v in sc.items():
                    top = np.argsort(-v)
                    for kk in KS:
                        if best[:kk].sum() > 1e-6:
                            acc.setdefault((name, kk), []).append(mass[i, h, top[:kk]].sum() / best[:kk].sum())
    return head_dim


def read_recordings(description):
    """The command line read (RECORDS_DIR, --every): (its arguments, [(file, the statistics of the
    other files' queries, as query_sums gives them, summed)]), in file-name order. Exits with a
    message for a bad argument, an unreadable file, or fewer than two files."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("records", help="a directory of *.zoom-record.gguf files")
    ap.add_argument("--every", type=int, default=1, help="read every N-th file (sorted by name)")
    a = ap.parse_args()
    if a.every < 1:
        sys.exit("--every must be at least 1")
    if not os.path.isdir(a.records):
        sys.exit(f"{a.records} is not a directory")
    files = sorted(f for f in glob.glob(os.path.join(a.records, "*.zoom-record.gguf"))
                   if os.path.isfile(f))[:: a.every]
    if len(files) < 2:
        sys.exit(f"{a.records}: the query statistics come from the other recordings: give at least "
                 f"two *.zoom-record.gguf files")
    sums = {}
    for f in files:
        try:
            sums[f] = query_sums(f)
        except (ValueError, KeyError, OSError) as e:
            sys.exit(f"{f}: not a zoom recording this script reads ({e})")
    total = {}
    for one in sums.values():
        for key, (c, s1, s2) in one.items():
            t = total.get(key, (0, 0.0, 0.0))
            total[key] = (t[0] + c, t[1] + s1, t[2] + s2)
    out = []
    for f in files:
        others = {}
        for key, (c, s1, s2) in total.items():
            own = sums[f].get(key, (0, 0.0, 0.0))
            if c - own[0] < 1:
                sys.exit(f"{f}: no other recording has queries of layer {key[0]}, KV head {key[1]}")
            others[key] = (c - own[0], s1 - own[1], s2 - own[2])
        out.append((f, others))
    return a, out


def main():
    a, recordings = read_recordings(__doc__.split("\n\n")[0])
    files = [f for f, _ in recordings]
    d = None
    scores = ("summary", "mean", "gauss", "sketch16", "sketch32", "far", "bound", "bound16", "bound32", "sign1", "kept1", "kept2", "max")
    acc = {}
    for f, others in recordings:
        try:
            d = probe(f, scores, acc, others) or d
        except (ValueError, KeyError, OSError) as e:
            sys.exit(f"{f}: not a zoom recording this script reads ({e})")
    if (scores[0], 1) not in acc:
        sys.exit("no recorded query sees 10 spans or more with any mass on them")
    n = len(acc[(scores[0], 1)])
    one = np.array(acc["one_key"])
    rows = {"summary": 1, "mean": 1, "gauss": 1 + (d * (d + 1) / 2) / (2 * d),
            "sketch16": 1 + (16 + 136) / (2 * d), "sketch32": 1 + (32 + 528) / (2 * d),
            "far": 1.5, "bound": 2, "bound16": 1 + 32 / (2 * d), "bound32": 1 + 64 / (2 * d),
            "sign1": "1 + {:.3f} a token".format((d / 32 + 1) / (2 * d)), "kept1": 1.5, "kept2": 2, "max": None}
    print(f"# {len(files)} recordings from {a.records}, {n} (query, layer, head) examples, head_dim {d}")
    print("score     " + "".join(f"  k={kk:<5}" for kk in KS) + "  rows/span")
    for name in scores:
        cost = "all keys" if rows[name] is None else rows[name] if isinstance(rows[name], str) else f"{rows[name]:.2f}"
        print(f"{name:<10}" + "".join(f"  {np.mean(acc[(name, kk)]):.3f}  " for kk in KS) + f"  {cost}")
    print(f"the span of most mass: its largest key holds {np.median(one):.3f} of the span's mass "
          f"(median; mean {one.mean():.3f}, quartiles {np.quantile(one, 0.25):.3f}-{np.quantile(one, 0.75):.3f})")


if __name__ == "__main__":
    main()
