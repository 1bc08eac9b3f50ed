#!/usr/bin/env python3
"""At an equal fast-tier budget, how much of each head's attention do routing scores leave on
summary rows? (docs/sekv.md, "What did not work").

    python3 -m venv /tmp/probe && /tmp/probe/bin/pip install gguf numpy
    /tmp/probe/bin/python lab/scripts/span-budget-probe.py RECORDS_DIR

span-score-probe.py ranks spans on the recording's own segmentation, so a score that keeps more
in the fast tier a span (kept keys, a sketch) is compared as if its spans cost one row. Here each
score gets the segmentation SEKV would seal the document with when a span costs that score's
rows (segment_within_budget in engine/sekv/sekv_spans.cpp: anchors above μ + α·σ of the surprisal,
runs of 4 to 32 tokens, α raised in steps of 0.25 until the full-resolution rows + rows·spans +
128 reserve rows fit 35 % of the tokens): more rows a span means a higher α, fewer anchors, more
tokens in spans. Then, per recorded query (zoom_record.h: spans ending `tail` tokens before it
are held at two resolutions, every other row up to it at full resolution), each query head
expands round(rate · visible spans) spans by the score (τ per query, router.cpp calibrate_tau),
the KV group expands the union of its heads' choices (sekv_routing.cpp), and what is measured is
the teacher's attention mass on the visible spans left unexpanded: the mass a query head gets
only through summary rows (0 = every row it attends to is exact), and the layer output's squared
error relative to full attention's, ‖o − o_full‖² / ‖o_full‖², o as mixed_attention.h computes it
(one softmax over the exact rows and each unexpanded span's summary row with bias log|S|; an
expanded span's rows exact, the factors' rank cut not modelled). Lower is better for both. The
teacher's mass is softmax(s q·k_j) over j <= p on the recorded keys, its output the same weights
on the recorded values (the script checks both against the recording's span_mass and output).

Scores (as in span-score-probe.py; z_i = s q·k_i; the query statistics of `keptJ` are fitted on
the other recordings read, never on the one scored):

  summary  s q·k̄ + log|S|, k̄ the surprisal-weighted summary key: 1 row a span (the training-free
           router; its summary row (k̄, v̄) surprisal-weighted, as docs/sekv.md builds it)
  mean     s q·k̃ + log|S|, the summary row the plain means (k̃, ṽ): 1 row
  far      log(exp(z_far) + (|S|−1) exp(s q·k̃)), k_far the key furthest from k̃, kept beside the
           plain-mean summary row: 1.5 rows
  keptJ    log(Σ_{i∈K} exp(z_i) + (|S|−J) exp(s q·k̃)), K the J keys of most expected attention
           under the queries, kept beside the plain-mean summary row: 1 + J/2 rows
  oracle   the teacher's mass itself (reads every key at every query), with the summary rows of
           `summary`: 1 row; no per-head choice of the 1-row segmentation's spans leaves less of
           that head's mass on summaries (the error and the KV group's union aside)
  rerankN  two-stage routing (eval --rerank N, SekvRouterOptions::rerank): the spans `summary`
           ranks in the top round(min(1, N · rate) · visible spans) are the head's candidates (τ
           per query at N times the rate, as sekv_routing.cpp), and of them the count
           of most teacher mass are expanded (the engine scores keys rebuilt from the key
           factors, here the true keys); summary rows of `summary`, 1 row

The kept keys serve the routing only; the output reads the summary rows. The router's own
relevance (router.h span_relevance) is σ(q·k̄/√d + log|S|): the scores here use the layer's
attention scale s instead of 1/√d, the same for Gemma 3 (s = 1/√256), and rank without the
sigmoid, so spans whose logits saturate it (above about 37) are not tied as in the engine.
Only the 1-row segmentation is checked against the recording's.

Besides each rate it prints the mass on the visible spans with nothing expanded (what the
segmentation alone leaves on summaries) and the tokens each head expands.
"""
import importlib.util
import os
import sys

try:
    import gguf
    import numpy as np
except ImportError as e:
    sys.exit(f"{e}: this script needs the PyPI packages gguf and numpy (see its docstring)")

# What the two probes share comes from the score probe beside this script.
_spec = importlib.util.spec_from_file_location(
    "span_score_probe", os.path.join(os.path.dirname(os.path.abspath(__file__)), "span-score-probe.py"))
_score_probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_score_probe)
field, read_recordings = _score_probe.field, _score_probe.read_recordings
summary_weights, expected_attention = _score_probe.summary_weights, _score_probe.expected_attention

RATES = (0.0, 0.00625, 0.0125, 0.025)  # 0: nothing expanded
BUDGET, RESERVE, ALPHA, MIN_SPAN, MAX_SPAN = 0.35, 128, 1.0, 4, 32  # SekvOptions' defaults
SCHEMES = (("summary", 1.0), ("mean", 1.0), ("far", 1.5), ("kept1", 1.5), ("kept2", 2.0),
           ("kept4", 3.0), ("oracle", 1.0), ("rerank2", 1.0), ("rerank4", 1.0), ("rerank8", 1.0),
           ("rerank16", 1.0))


def segment(sur, alpha):
    """engine/sekv/segmentation.cpp segment(): spans [(begin, end)] and the full-resolution count."""
    fin = np.isfinite(sur)
    mu = sur[fin].mean() if fin.any() else 0.0
    sigma = np.sqrt(((sur[fin] - mu) ** 2).mean()) if fin.any() else 0.0
    thr = mu + alpha * sigma
    anchor = ~fin | (sur > thr)  # NaN compares False, so ~fin marks it
    anchor[0] = True
    spans, full, run = [], 0, -1
    for i in range(len(sur) + 1):
        if i == len(sur) or anchor[i]:
            if run >= 0:
                n = i - run
                if n < MIN_SPAN:
                    full += n
                else:
                    pieces = (n + MAX_SPAN - 1) // MAX_SPAN
                    spans += [(run + n * k // pieces, run + n * (k + 1) // pieces) for k in range(pieces)]
            run = -1
            full += i < len(sur)
        elif run < 0:
            run = i
    return spans, full


def segment_within_budget(sur, rows):
    """engine/sekv/sekv_spans.cpp segment_within_budget() for a budget in (0, 1): None if unmet."""
    n = len(sur)
    for step in range(33):
        spans, full = segment(sur, ALPHA + 0.25 * step)
        if full + rows * len(spans) + RESERVE <= BUDGET * n:
            return spans
    return None


def span_keys(ks, vs, w, e):
    """What the scores keep of one span's keys and values [n][d]: the summary key and value
    (surprisal-weighted, span_factors.h span_weights), the plain means, the far key, the 4 keys of
    most expected attention e [n]."""
    mean = ks.mean(0)
    w = summary_weights(w)
    return (w @ ks, w @ vs, mean, vs.mean(0), ks[np.argmax(np.linalg.norm(ks - mean, axis=1))],
            ks[np.argsort(-e)[:4]])


def lse_rows(a):
    """log Σ exp over the last axis, stable, for a 2-D array."""
    m = a.max(1, keepdims=True)
    return (m + np.log(np.exp(a - m).sum(1, keepdims=True)))[:, 0]


def scores_of(name, x, qq, scale):
    """The score of every span [n_spans] for one query qq [d]; x: the spans' kept keys."""
    n = x["n"]
    mean = scale * x["mean"] @ qq
    if name == "summary":
        return scale * x["kbar"] @ qq + np.log(n)
    if name == "mean":
        return mean + np.log(n)
    if name == "far":
        return np.logaddexp(scale * x["far"] @ qq, mean + np.log(np.maximum(n - 1, 1e-300)))
    j = int(name[4:])
    kept = scale * x["kept"][:, :j] @ qq  # [n_spans][j]; every span holds >= MIN_SPAN = 4 keys
    rest = np.where(n > j, mean + np.log(np.maximum(n - j, 1)), -np.inf)
    return lse_rows(np.concatenate([kept, rest[:, None]], axis=1))


def probe(path, stats, acc, checked, out_err):
    """Adds the recording's examples to acc; returns None, or why it adds none."""
    r = gguf.GGUFReader(path)
    rec_begin = np.atleast_1d(field(r, "spans.begin")).astype(int)
    rec_end = np.atleast_1d(field(r, "spans.end")).astype(int)
    qpos = np.atleast_1d(field(r, "query_pos")).astype(int)
    if len(qpos) == 0:
        return "no query (a document too short for the first query position)"
    tail = int(field(r, "tail")[0])
    budget = float(field(r, "budget")[0])
    if abs(budget - BUDGET) > 1e-9:
        raise ValueError(f"recorded for a budget of {budget}, this script models {BUDGET}")
    layers = np.atleast_1d(field(r, "layers")).astype(int)
    t = {x.name: np.array(x.data) for x in r.tensors}
    sur = t["token_surprisal"].astype(np.float64)
    segs = {}
    for rows in sorted({rows for _, rows in SCHEMES}):
        segs[rows] = segment_within_budget(sur, rows)
        if segs[rows] is None:  # the engine would hold it all at full resolution, over budget
            return f"no segmentation within the budget at {rows} rows a span"
    if [s for s in segs[1.0]] != list(zip(rec_begin, rec_end)):
        raise ValueError("this script's segmentation differs from the recording's")
    mine = {}  # (score, rate) -> this recording's output errors
    for layer in layers:
        k = t[f"layer.{layer}.k"].astype(np.float64)  # [n][n_kv][d]
        v = t[f"layer.{layer}.v"].astype(np.float64)  # [n][n_kv][d]
        out = t[f"layer.{layer}.out"].astype(np.float64)  # [nq][h][d]
        q = t[f"layer.{layer}.q"].astype(np.float64)  # [nq][h][d]
        mass = t[f"layer.{layer}.span_mass"].astype(np.float64)  # [nq][h][ns]
        scale = float(field(r, f"layer.{layer}.scale")[0])
        n_head, n_kv = q.shape[1], k.shape[1]
        group = n_head // n_kv
        keys = {}  # (rows, g) -> the kept keys of every span of that segmentation
        for g in range(n_kv):
            count, qsum, qq2 = stats[(layer, g)]
            muq = qsum / count
            covq = qq2 / count - np.outer(muq, muq)
            kg = k[:, g]
            e_all = expected_attention(kg, scale, muq, covq)
            for rows, spans in segs.items():
                parts = [span_keys(kg[b:e], v[b:e, g], sur[b:e], e_all[b:e]) for b, e in spans]
                keys[(rows, g)] = {"n": np.array([e - b for b, e in spans], dtype=np.float64),
                                   "b": np.array([b for b, _ in spans]), "e": np.array([e for _, e in spans]),
                                   **{name: np.array([p[c] for p in parts]) for c, name in
                                      enumerate(("kbar", "vbar", "mean", "vmean", "far", "kept"))}}
        for i, p in enumerate(qpos):
            # The teacher's mass on each token up to p, per query head: [h][p + 1].
            z = scale * np.einsum("hd,jhd->hj", q[i], np.repeat(k[:p + 1], group, axis=1))
            zmax = z.max(1, keepdims=True)
            ez = np.exp(z - zmax)  # [h][p + 1]
            pt = ez / ez.sum(1, keepdims=True)
            cum = np.concatenate([np.zeros((n_head, 1)), np.cumsum(pt, axis=1)], axis=1)
            # Σ_j<t ez_j v_j [h][p + 2][d] and the teacher's output, checked against the recording's.
            vh = np.repeat(v[:p + 1], group, axis=1).transpose(1, 0, 2)  # [h][p + 1][d]
            cum_v = np.concatenate([np.zeros((n_head, 1, vh.shape[2])), np.cumsum(ez[:, :, None] * vh, axis=1)], axis=1)
            z_all, n_all = ez.sum(1), cum_v[:, -1]
            o_full = n_all / z_all[:, None]
            out_err.append(np.max(np.linalg.norm(o_full - out[i], axis=1) / np.linalg.norm(out[i], axis=1)))
            vis1 = [s for s, (b, e) in enumerate(segs[1.0]) if e <= p - tail]
            if len(vis1) < 10:
                continue
            got = np.array([[cum[h, e] - cum[h, b] for b, e in segs[1.0][:len(vis1)]] for h in range(n_head)])
            err = np.abs(got - mass[i][:, :len(vis1)]).max()
            checked.append(err)
            for name, rows in SCHEMES:
                spans = segs[rows]
                nv = sum(1 for b, e in spans if e <= p - tail)
                smass = np.array([[cum[h, e] - cum[h, b] for b, e in spans[:nv]] for h in range(n_head)])
                for rate in RATES:
                    e_n = min(int(np.floor(rate * nv + 0.5)), nv)  # llround, as calibrate_tau
                    for g in range(n_kv):
                        heads = range(g * group, (g + 1) * group)
                        chosen = set()
                        for h in heads:
                            if e_n == 0:
                                continue
                            if name == "oracle":
                                sc = smass[h]
                            elif name.startswith("rerank"):
                                x = keys[(rows, g)]
                                sub = {key: v[:nv] for key, v in x.items()}
                                wide = np.argsort(-scores_of("summary", sub, q[i, h], scale),
                                                  kind="stable")[:int(np.floor(min(1.0, int(name[6:]) * rate) * nv + 0.5))]
                                sc = np.full(nv, -np.inf)
                                sc[wide] = smass[h, wide]
                            else:
                                x = keys[(rows, g)]
                                sub = {key: v[:nv] for key, v in x.items()}
                                sc = scores_of(name, sub, q[i, h], scale)
                            chosen.update(np.argsort(-sc, kind="stable")[:e_n].tolist())
                        idx = np.array(sorted(chosen), dtype=int)
                        tokens = sum(spans[s][1] - spans[s][0] for s in idx)
                        unexp = np.setdiff1d(np.arange(nv), idx)
                        x = keys[(rows, g)]
                        design_rows = name in ("summary", "oracle") or name.startswith("rerank")
                        ksum, vsum = (x["kbar"], x["vbar"]) if design_rows else (x["mean"], x["vmean"])
                        bs, es = x["b"][unexp], x["e"][unexp]
                        for h in heads:
                            left = smass[h].sum() - (smass[h, idx].sum() if len(idx) else 0.0)
                            acc.setdefault((name, rate), []).append(left)
                            acc.setdefault((name, rate, "tokens"), []).append(tokens)
                            # SEKV's output (mixed_attention.h): the unexpanded spans' rows
                            # replaced by their summary rows (bias log|S|); expanded spans exact.
                            w_sum = np.exp(scale * ksum[unexp] @ q[i, h] + np.log(x["n"][unexp]) - zmax[h, 0])
                            zz = z_all[h] * (1 - (cum[h, es] - cum[h, bs]).sum()) + w_sum.sum()
                            nn = n_all[h] - (cum_v[h, es] - cum_v[h, bs]).sum(0) + w_sum @ vsum[unexp]
                            o = nn / zz
                            error = np.sum((o - o_full[h]) ** 2) / np.sum(o_full[h] ** 2)
                            acc.setdefault((name, rate, "out"), []).append(error)
                            mine.setdefault((name, rate), []).append(error)
    if not mine:
        return "no query sees 10 spans or more"
    for key, errors in mine.items():
        acc.setdefault(("per recording",) + key, []).append(np.mean(errors))
    return None


def main():
    a, recordings = read_recordings(__doc__.split("\n\n")[0])
    acc, checked, out_err, skipped = {}, [], [], []
    for f, others in recordings:
        try:
            why = probe(f, others, acc, checked, out_err)
        except KeyError as e:
            sys.exit(f"{f}: no {e} in the recording, or no other recording has queries of it")
        except (ValueError, OSError) as e:
            sys.exit(f"{f}: not a zoom recording this script reads ({e})")
        if why:
            skipped.append(f"{os.path.basename(f)}: {why}")
    if not checked:
        sys.exit("no recorded query sees 10 spans or more")
    worst = max(checked)
    if worst > 1e-4:
        sys.exit(f"the teacher's mass computed here differs from the recorded span_mass by {worst:.2e}")
    worst_out = max(out_err)
    if worst_out > 1e-3:
        sys.exit(f"the teacher's output computed here differs from the recorded one by {worst_out:.2e} (relative)")
    n = len(acc[(SCHEMES[0][0], RATES[0])])
    print(f"# {len(recordings) - len(skipped)} of {len(recordings)} recordings from {a.records}, {n} "
          f"(query, layer, head) examples; recorded span_mass reproduced within {worst:.1e}, output "
          f"within {worst_out:.1e} (relative)")
    for line in skipped:
        print(f"#   left out: {line}")
    print("per rate: the mass left on summary rows, the layer output's squared error relative to "
          "full attention's (means over examples; lower is better), tokens expanded a KV group")
    print(f"{'score':<8} {'rows':>4}" + "".join(f"  {100 * rt:>5.3g} %: mass, error, tokens" for rt in RATES))
    for name, rows in SCHEMES:
        line = f"{name:<8} {rows:>4.1f}"
        for rt in RATES:
            line += (f"  {np.mean(acc[(name, rt)]):>9.3f}, {np.mean(acc[(name, rt, 'out')]):.4f}, "
                     f"{np.mean(acc[(name, rt, 'tokens')]):>5.1f}")
        print(line)
    print("per recording (its mean output error), each score against summary: lower on how many "
          "recordings, and the mean and standard deviation of the recordings' relative differences")
    for name, _ in SCHEMES[1:]:
        line = f"{name:<8}     "
        for rt in RATES:
            mine = np.array(acc[("per recording", name, rt)])
            base = np.array(acc[("per recording", "summary", rt)])
            rel = mine / base - 1
            line += f"  {int((mine < base).sum()):>2} of {len(base)}, {100 * rel.mean():+5.1f} % ± {100 * rel.std(ddof=1):4.1f}"
        print(line)


if __name__ == "__main__":
    main()
