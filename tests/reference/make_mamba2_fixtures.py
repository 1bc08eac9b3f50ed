#!/usr/bin/env python3
"""Writes tests/reference/fixtures/mamba2.json, an independent float64 reference for the Mamba-2
mixer layer (engine/recurrent_mamba2.*), checked by tests/unit/test_recurrent_mamba2.cpp.

How to run (from the repository root):

    python3 tests/reference/make_mamba2_fixtures.py

Needs numpy only (generated with Python 3.11.7, numpy 2.4.6). Seeded: a rerun writes the same
bytes.

The layer is written here naively, one token at a time, from the formulas of Dao & Gu 2024,
"Transformers are SSMs" (§3.1 eq. 2 for the recurrence, §7.1 for the block) and the reference
module mamba_ssm.modules.mamba2.Mamba2 (norm_before_gate=False, grouped RMSNorm):

    [z | xBC | dt_raw] = W_in u_t
    xBC  = SiLU(causal depthwise conv1d(xBC) + b)        (left padding: zeros, or a given tail)
    x [H][P], B [G][N], C [G][N] = split(xBC); head h reads group h // (H // G)
    dt   = softplus(dt_raw + dt_bias)                    (softplus(v) = v above 20)
    S_h  = exp(dt_h A_h) S_h + dt_h x_h B_g^T ;  y_h = S_h C_g + D_h x_h
    y    = RMSNorm_groups(y * SiLU(z)) * w_norm          (groups of d_inner / G channels)
    out  = W_out y

Weights and inputs are drawn in float32 and written with 9 significant digits, so the C++ test
reads back exactly the float32 values this script computed with (in float64).

Contents:
  * shape: d_model, d_inner, d_state, n_heads, head_dim, n_groups, d_conv, rms_eps;
  * weights: in_proj [in_proj_dim][d_model], out_proj [d_model][d_inner], conv_weight
    [conv_dim][d_conv], conv_bias [conv_dim], dt_bias [H], A [H] (= -exp(A_log), as GGUF's
    ssm_a), D [H], norm_weight [d_inner]; all row-major, flattened;
  * first: from the zero state, u [T][d_model] (T = 37) -> y [T][d_model], and the state after
    it: ssm [H][P][N], conv tail [d_conv-1][conv_dim] (raw conv inputs, oldest first),
    log_decay [H] = sum_t dt_t * A_h (nats);
  * second: 6 more tokens continuing from that state, with the same four outputs (log_decay
    keeps accumulating from the zero state).
"""

import json
import os

import numpy as np

SEED = 20250611
D_MODEL, H, P, N, G, D_CONV, T, T2 = 16, 4, 4, 8, 2, 4, 37, 6
D_INNER = H * P
CONV_DIM = D_INNER + 2 * G * N
IN_PROJ = 2 * D_INNER + 2 * G * N + H
RMS_EPS = 1e-5

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mamba2.json")


def f32(a):
    return np.asarray(a, dtype=np.float32)


def softplus(v):
    return np.where(v <= 20.0, np.log1p(np.exp(np.minimum(v, 20.0))), v)


def silu(v):
    return v / (1.0 + np.exp(-v))


def layer(w, u, ssm, tail):
    """Naive float64 forward over u [T][d_model] from (ssm [H][P][N], tail [K-1][conv_dim]).
    Returns (out, ssm, tail, log_decay_of_this_stretch)."""
    u = u.astype(np.float64)
    zxbcdt = u @ w["in_proj"].T
    z = zxbcdt[:, :D_INNER]
    xbc_raw = zxbcdt[:, D_INNER:D_INNER + CONV_DIM]
    dt_raw = zxbcdt[:, D_INNER + CONV_DIM:]
    padded = np.concatenate([tail, xbc_raw], axis=0)  # [K-1+T][conv_dim]
    n = u.shape[0]
    xbc = np.empty((n, CONV_DIM))
    for t in range(n):
        window = padded[t:t + D_CONV]  # [K][conv_dim], oldest first
        xbc[t] = silu(w["conv_bias"] + np.sum(w["conv_weight"].T * window, axis=0))
    dt = softplus(dt_raw + w["dt_bias"])
    ssm = ssm.copy()
    y = np.zeros((n, H, P))
    hpg = H // G
    for t in range(n):
        x = xbc[t, :D_INNER].reshape(H, P)
        B = xbc[t, D_INNER:D_INNER + G * N].reshape(G, N)
        C = xbc[t, D_INNER + G * N:].reshape(G, N)
        for h in range(H):
            g = h // hpg
            ssm[h] = np.exp(dt[t, h] * w["A"][h]) * ssm[h] + dt[t, h] * np.outer(x[h], B[g])
            y[t, h] = ssm[h] @ C[g] + w["D"][h] * x[h]
    y = y.reshape(n, D_INNER) * silu(z)
    yg = y.reshape(n, G, D_INNER // G)
    yg = yg / np.sqrt(np.mean(yg * yg, axis=-1, keepdims=True) + RMS_EPS)
    y = yg.reshape(n, D_INNER) * w["norm_weight"]
    out = y @ w["out_proj"].T
    log_decay = np.sum(dt * w["A"][None, :], axis=0)
    return out, ssm, padded[-(D_CONV - 1):].copy(), log_decay


def make_weights(rng):
    # Mamba2's initialisation ranges: A in [1, 16] -> here a narrower [0.3, 4] so that state
    # carried from early tokens still matters at T; dt_init in [0.001, 0.1] -> [0.01, 0.3].
    dt_init = np.exp(rng.uniform(np.log(0.01), np.log(0.3), H))
    A_log = np.log(rng.uniform(0.3, 4.0, H))
    return {
        "in_proj": f32(rng.normal(0.0, 1.0 / np.sqrt(D_MODEL), (IN_PROJ, D_MODEL))),
        "out_proj": f32(rng.normal(0.0, 1.0 / np.sqrt(D_INNER), (D_MODEL, D_INNER))),
        "conv_weight": f32(rng.normal(0.0, 0.5, (CONV_DIM, D_CONV))),
        "conv_bias": f32(rng.normal(0.0, 0.1, CONV_DIM)),
        "dt_bias": f32(dt_init + np.log(-np.expm1(-dt_init))),  # inverse softplus
        "A": f32(-np.exp(A_log)),
        "D": f32(rng.uniform(0.5, 1.5, H)),
        "norm_weight": f32(rng.uniform(0.5, 1.5, D_INNER)),
    }


def flat(a):
    return [float("%.9g" % v) for v in np.asarray(a, dtype=np.float64).ravel()]


def flat64(a):
    return [float("%.12g" % v) for v in np.asarray(a, dtype=np.float64).ravel()]


def main():
    rng = np.random.default_rng(SEED)
    w32 = make_weights(rng)
    w = {k: v.astype(np.float64) for k, v in w32.items()}
    u1 = f32(rng.normal(0.0, 1.0, (T, D_MODEL)))
    u2 = f32(rng.normal(0.0, 1.0, (T2, D_MODEL)))

    ssm0 = np.zeros((H, P, N))
    tail0 = np.zeros((D_CONV - 1, CONV_DIM))
    y1, ssm1, tail1, ld1 = layer(w, u1, ssm0, tail0)
    y2, ssm2, tail2, ld2 = layer(w, u2, ssm1, tail1)

    fixture = {
        "meta": {
            "generator": "tests/reference/make_mamba2_fixtures.py",
            "seed": SEED,
            "numpy": np.__version__,
            "precision": "float64 naive per-token recurrence; weights/inputs are float32 values",
        },
        "shape": {
            "d_model": D_MODEL, "d_inner": D_INNER, "d_state": N, "n_heads": H,
            "head_dim": P, "n_groups": G, "d_conv": D_CONV, "rms_eps": RMS_EPS,
        },
        "weights": {k: flat(v) for k, v in w32.items()},
        "first": {
            "n_tokens": T, "u": flat(u1), "y": flat64(y1), "ssm": flat64(ssm1),
            "conv": flat64(tail1), "log_decay": flat64(ld1),
        },
        "second": {
            "n_tokens": T2, "u": flat(u2), "y": flat64(y2), "ssm": flat64(ssm2),
            "conv": flat64(tail2), "log_decay": flat64(ld1 + ld2),
        },
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(fixture, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes); log_decay after T={T}: {ld1}")


if __name__ == "__main__":
    main()
