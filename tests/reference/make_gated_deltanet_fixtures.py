#!/usr/bin/env python3
"""Writes tests/reference/fixtures/gated_deltanet.json, the independent reference for the Gated
DeltaNet layer (engine/model/recurrent_gated_deltanet.cpp), checked by
tests/unit/test_recurrent_gated_deltanet.cpp.

How to run (from the repository root; numpy only, seeded, the same bytes on every run):

    python3 tests/reference/make_gated_deltanet_fixtures.py

Generated with Python 3.11.7 and numpy 2.4.6.

The layer is computed naively in float64, one token at a time, straight from the formulas:
Yang, Kautz & Hatamizadeh 2025, "Gated Delta Networks: Improving Mamba2 with Delta Rule" (ICLR
2025) §3.1, S_t = S_{t-1} · (alpha_t (I - beta_t k_t k_t^T)) + beta_t v_t k_t^T, o_t = S_t q_t, as
matrix products (no chunking, no WY form), inside the layer of HF transformers'
Qwen3NextGatedDeltaNet with the tensor layout llama.cpp's converter writes for arch `qwen3next`:
  * attn_qkv rows [q of all k heads | k | v of all v heads], attn_gate rows z;
  * ssm_ba rows grouped per k head g: [b of v heads g*r .. g*r+r-1 | a of the same heads],
    r = n_v_heads / n_k_heads; v head j reads q/k head j // r;
  * causal depthwise conv (no bias) over q|k|v, weight [conv_dim][d_conv], tap d_conv-1 on the
    current token, then SiLU; q, k <- x / sqrt(sum x^2 + 1e-6) per head, q also / sqrt(d_k);
  * beta = sigmoid(b); g = A * softplus(a + dt_bias) with A = -exp(A_log) (GGUF ssm_a);
  * gated RMSNorm per v head: o / sqrt(mean(o^2) + eps) * norm_weight * silu(z); then out_proj.

The decay parameters are drawn so that alpha stays near 1 (checks.alpha_min / alpha_max record
the range); HF's init, A_log = log U(0, 16), forgets almost everything per token and would test
little of the state.

Contents: `shape`; `x` [T][d_model]; `weights` (qkv [conv_dim][d_model], gate [n_v*d_v][d_model],
ba [2 n_v][d_model], out [d_model][n_v*d_v], conv_weight [conv_dim][d_conv], dt_bias [n_v],
A [n_v], norm_weight [d_v]), all float32 values written in their shortest round-trip form, so
the C++ test reads the exact same inputs; `expected` from the zero state (a fresh document): y
[T][d_model], s [n_v][d_v][d_k] the final state, conv [d_conv-1][conv_dim] the last raw conv
inputs, transition [n_v][d_k][d_k] = prod_t alpha_t (I - beta_t k_t k_t^T) over the whole run (time
order), and `checks`: the identity S_T = S_0 T + S_T|0 verified here on a random S_0.
"""

import json
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "gated_deltanet.json")

SHAPE = dict(d_model=16, n_k_heads=2, n_v_heads=4, d_k=8, d_v=8, d_conv=4, rms_eps=1e-6,
             l2_eps=1e-6)
N_TOKENS = 37
SEED = 20251130


def f32(a):
    return np.asarray(a, dtype=np.float32)


def listed(a):
    """float32 array -> list of shortest round-trip decimal strings parsed back as float."""
    return [float(np.format_float_positional(v, unique=True)) for v in f32(a).ravel()]


def silu(x):
    return x / (1.0 + np.exp(-x))


def softplus(x):
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def make_inputs(rng):
    s = SHAPE
    key_dim = s["n_k_heads"] * s["d_k"]
    value_dim = s["n_v_heads"] * s["d_v"]
    conv_dim = 2 * key_dim + value_dim
    dm = s["d_model"]
    w = {
        "qkv": f32(rng.normal(0.0, 1.0 / np.sqrt(dm), (conv_dim, dm))),
        "gate": f32(rng.normal(0.0, 1.0 / np.sqrt(dm), (value_dim, dm))),
        "ba": f32(rng.normal(0.0, 1.0 / np.sqrt(dm), (2 * s["n_v_heads"], dm))),
        "out": f32(rng.normal(0.0, 1.0 / np.sqrt(value_dim), (dm, value_dim))),
        "conv_weight": f32(rng.normal(0.0, 0.5, (conv_dim, s["d_conv"]))),
        "dt_bias": f32(rng.uniform(-3.0, -1.0, s["n_v_heads"])),
        "A": f32(-np.exp(np.log(rng.uniform(0.05, 0.6, s["n_v_heads"])))),  # -exp(A_log)
        "norm_weight": f32(rng.uniform(0.5, 1.5, s["d_v"])),
    }
    x = f32(rng.normal(0.0, 1.0, (N_TOKENS, dm)))
    return x, w


def reference(x, w, s0=None):
    """Naive float64 forward from state (s0, zero conv tail); returns y, S, conv tail, T and
    every alpha_t."""
    s = SHAPE
    nk, nv, dk, dv, kc = s["n_k_heads"], s["n_v_heads"], s["d_k"], s["d_v"], s["d_conv"]
    r = nv // nk
    key_dim, value_dim = nk * dk, nv * dv
    conv_dim = 2 * key_dim + value_dim
    W = {k: np.asarray(v, dtype=np.float64) for k, v in w.items()}
    S = np.zeros((nv, dv, dk)) if s0 is None else np.array(s0, dtype=np.float64)
    T = np.stack([np.eye(dk) for _ in range(nv)])
    tail = np.zeros((kc - 1, conv_dim))
    ys, alphas = [], []
    eye = np.eye(dk)
    for xt in np.asarray(x, dtype=np.float64):
        qkv = W["qkv"] @ xt
        z = W["gate"] @ xt
        ba = W["ba"] @ xt
        window = np.vstack([tail, qkv[None, :]])  # [kc][conv_dim], oldest first
        conv = np.einsum("cj,jc->c", W["conv_weight"], window)
        tail = window[1:]
        act = silu(conv)
        q = act[:key_dim].reshape(nk, dk)
        k = act[key_dim:2 * key_dim].reshape(nk, dk)
        v = act[2 * key_dim:].reshape(nv, dv)
        q = q / np.sqrt((q * q).sum(-1, keepdims=True) + s["l2_eps"]) / np.sqrt(dk)
        k = k / np.sqrt((k * k).sum(-1, keepdims=True) + s["l2_eps"])
        o = np.zeros((nv, dv))
        for j in range(nv):
            g_idx, i = divmod(j, r)
            b = ba[g_idx * 2 * r + i]
            a = ba[g_idx * 2 * r + r + i]
            beta = 1.0 / (1.0 + np.exp(-b))
            alpha = np.exp(W["A"][j] * softplus(a + W["dt_bias"][j]))
            alphas.append(alpha)
            kj, qj = k[j // r], q[j // r]
            step = alpha * (eye - beta * np.outer(kj, kj))
            S[j] = S[j] @ step + beta * np.outer(v[j], kj)
            T[j] = T[j] @ step
            o[j] = S[j] @ qj
        zz = z.reshape(nv, dv)
        normed = o / np.sqrt((o * o).mean(-1, keepdims=True) + s["rms_eps"])
        gated = normed * W["norm_weight"][None, :] * silu(zz)
        ys.append(W["out"] @ gated.ravel())
    return np.array(ys), S, tail, T, np.array(alphas)


def main():
    rng = np.random.default_rng(SEED)
    x, w = make_inputs(rng)
    y, S, tail, T, alphas = reference(x, w)

    # The composition identity on this run, as a self-check of the reference.
    s0 = rng.normal(0.0, 1.0, S.shape)
    _, S_from_s0, _, _, _ = reference(x, w, s0)
    composed = np.einsum("hvk,hkl->hvl", s0, T) + S
    comp_err = float(np.abs(composed - S_from_s0).max())
    assert comp_err < 1e-10, comp_err

    doc = {
        "meta": {
            "generator": "tests/reference/make_gated_deltanet_fixtures.py",
            "seed": SEED,
            "numpy": np.__version__,
            "precision": "float64 reference, float32 inputs",
        },
        "shape": dict(SHAPE, n_tokens=N_TOKENS),
        "x": listed(x),
        "weights": {k: listed(v) for k, v in w.items()},
        "expected": {
            "y": [float(v) for v in y.ravel()],
            "s": [float(v) for v in S.ravel()],
            "conv": [float(v) for v in tail.ravel()],
            "transition": [float(v) for v in T.ravel()],
        },
        "checks": {"composition_max_abs_err_float64": comp_err,
                   "alpha_min": float(alphas.min()), "alpha_max": float(alphas.max())},
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes); max|y| = {np.abs(y).max():.4f}, "
          f"max|S| = {np.abs(S).max():.4f}, composition self-check {comp_err:.2e}")


if __name__ == "__main__":
    main()
