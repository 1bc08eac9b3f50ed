#!/usr/bin/env python3
"""Writes two tiny hybrid GGUF models and llama.cpp's logits for them:

    tests/reference/fixtures/tiny_granitehybrid.gguf   Mamba-2 + attention (Granite 4.0-H)
    tests/reference/fixtures/tiny_qwen3next.gguf       Gated DeltaNet + gated attention + MoE
    tests/reference/fixtures/tiny_granitehybrid_moe.gguf  the Granite model with MoE FFN
    tests/reference/fixtures/hybrid_logits.json        llama.cpp's logits at every position

checked by tests/unit/test_hybrid_models.cpp (LlamaCppReference.*).

How to run (from the repository root):

    python3 tests/reference/make_hybrid_fixtures.py      # < 10 s, seeded

Needs gguf-py (0.19.0), numpy and llama-cpp-python 0.3.36 (its libllama knows both
architectures). The files are written with gguf-py's GGUFWriter helpers, i.e. with exactly the
metadata keys and tensor names llama.cpp's converters write (conversion/granite.py
GraniteHybridModel + conversion/mamba.py Mamba2Model; conversion/qwen.py Qwen3NextModel), in
ggml order (numpy shape reversed). Weights are random float32 (numpy seeds below); A is stored
as -exp(A_log) and conv kernels squeezed, as the converters do. The vocabulary is the tests'
tiny SentencePiece vocabulary (tests/unit/tiny_model.cpp tiny_vocab()).

llama.cpp runs on CPU with its defaults except flash attention off: f16 K/V cache (our exact
memories also round K/V to f16), f32 recurrent states. A fixed token sequence (BOS then ids drawn
with numpy) is evaluated in one batch with logits_all; the fixture stores every position's
logits (float32, little-endian, base64) and the provenance.
"""
import base64
import hashlib
import json
import os
import platform
import sys

import numpy as np
import gguf
import llama_cpp

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")


def tiny_vocab():
    v = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "\n"]
    v += ["<0x%02X>" % b for b in range(256)]
    for w in ["\u2581", "a", "b", "c", "e", "h", "t", "th", "the", "\u2581the", "\u2581a", "at",
              "\u2581cat", "c", "o"]:
        if w not in v:
            v.append(w)
    return v


def add_vocab(w):
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


class Tensors:
    def __init__(self, w, seed):
        self.w = w
        self.rng = np.random.default_rng(seed)

    def put(self, name, ne, data):
        # ggml's ne[0] is the contiguous dim: numpy shape is ne reversed.
        arr = np.asarray(data, dtype=np.float32).reshape(tuple(reversed(ne)))
        self.w.add_tensor(name, arr)

    def randn(self, n, scale, offset=0.0):
        return (offset + scale * self.rng.standard_normal(n)).astype(np.float32)

    def mat(self, name, cols, rows):
        self.put(name, [cols, rows], self.randn(cols * rows, 1.0 / np.sqrt(cols)))

    def norm(self, name, n):
        self.put(name, [n], self.randn(n, 0.1, 1.0))

    def ssm_a(self, n):  # A = -exp(A_log), A_log ~ U(log 1, log 16)
        return -np.exp(np.log(16.0) * self.rng.uniform(size=n))

    def dt_bias(self, n):  # softplus^-1(dt), dt log-uniform in [1e-3, 1e-1]
        dt = np.exp(np.log(1e-3) + self.rng.uniform(size=n) * np.log(100.0))
        return dt + np.log(-np.expm1(-dt))


GRANITE = dict(n_layer=4, attention_layers=[2], n_embd=32, n_ff=64, n_head=4, n_head_kv=2,
               d_state=16, ssm_heads=8, ssm_groups=2, d_conv=4, n_ctx=512,
               embedding_scale=2.0, residual_scale=0.5, attention_scale=0.125, logit_scale=2.0,
               rms_eps=1e-5, seed=7001)

# Granite 4.0-H Tiny / Small are MoE: experts feed_forward_length wide, softmax top-k with
# normalised weights, an ungated shared expert (conversion/granite.py GraniteMoeModel).
GRANITE_MOE = dict(GRANITE, n_ff=16, n_expert=4, n_expert_used=2, n_ff_shexp=24, seed=7003)

QWEN = dict(n_layer=4, full_attention_interval=2, n_embd=32, n_head=4, n_head_kv=2, head_dim=16,
            rope_dims=4, rope_base=10000000.0, n_expert=4, n_expert_used=2, n_ff_exp=16,
            n_ff_shexp=24, linear_k_heads=2, linear_v_heads=4, linear_head_dim=8, d_conv=4,
            n_ctx=512, rms_eps=1e-6, seed=7002)


def write_granite(path, c):
    w = gguf.GGUFWriter(path, "granitehybrid")
    E, N, H, G = c["n_embd"], c["d_state"], c["ssm_heads"], c["ssm_groups"]
    d_inner = 2 * E
    conv_dim = d_inner + 2 * G * N
    in_dim = 2 * d_inner + 2 * G * N + H
    hd = E // c["n_head"]
    attn = c["attention_layers"]
    w.add_name("tiny granitehybrid reference model")
    w.add_context_length(c["n_ctx"])
    w.add_embedding_length(E)
    w.add_block_count(c["n_layer"])
    w.add_feed_forward_length(c["n_ff"])
    w.add_head_count(c["n_head"])
    w.add_head_count_kv([c["n_head_kv"] if i in attn else 0 for i in range(c["n_layer"])])
    w.add_layer_norm_rms_eps(c["rms_eps"])
    w.add_attention_scale(c["attention_scale"])
    w.add_embedding_scale(c["embedding_scale"])
    w.add_residual_scale(c["residual_scale"])
    w.add_logit_scale(c["logit_scale"])
    w.add_rope_scaling_finetuned(False)  # Granite 4.0-H: no RoPE (conversion/granite.py)
    w.add_ssm_conv_kernel(c["d_conv"])
    w.add_ssm_state_size(N)
    w.add_ssm_group_count(G)
    w.add_ssm_inner_size(d_inner)
    w.add_ssm_time_step_rank(H)
    X = c.get("n_expert", 0)
    if X:
        w.add_expert_count(X)
        w.add_expert_used_count(c["n_expert_used"])
        w.add_expert_shared_feed_forward_length(c["n_ff_shexp"])
    V = add_vocab(w)
    t = Tensors(w, c["seed"])
    t.put("token_embd.weight", [E, V], t.randn(E * V, 0.5))
    t.norm("output_norm.weight", E)
    for il in range(c["n_layer"]):
        p = "blk.%d." % il
        t.norm(p + "attn_norm.weight", E)
        if il in attn:
            t.mat(p + "attn_q.weight", E, c["n_head"] * hd)
            t.mat(p + "attn_k.weight", E, c["n_head_kv"] * hd)
            t.mat(p + "attn_v.weight", E, c["n_head_kv"] * hd)
            t.mat(p + "attn_output.weight", c["n_head"] * hd, E)
        else:
            t.mat(p + "ssm_in.weight", E, in_dim)
            t.put(p + "ssm_conv1d.weight", [c["d_conv"], conv_dim], t.randn(c["d_conv"] * conv_dim, 0.5))
            t.put(p + "ssm_conv1d.bias", [conv_dim], t.randn(conv_dim, 0.1))
            t.put(p + "ssm_dt.bias", [H], t.dt_bias(H))
            t.put(p + "ssm_a", [1, H], t.ssm_a(H))
            t.put(p + "ssm_d", [1, H], t.randn(H, 0.1, 1.0))
            t.put(p + "ssm_norm.weight", [d_inner // G, G], t.randn(d_inner, 0.1, 1.0))
            t.mat(p + "ssm_out.weight", d_inner, E)
        t.norm(p + "ffn_norm.weight", E)
        if X:
            F, S = c["n_ff"], c["n_ff_shexp"]
            t.mat(p + "ffn_gate_inp.weight", E, X)
            t.put(p + "ffn_gate_exps.weight", [E, F, X], t.randn(E * F * X, 1.0 / np.sqrt(E)))
            t.put(p + "ffn_up_exps.weight", [E, F, X], t.randn(E * F * X, 1.0 / np.sqrt(E)))
            t.put(p + "ffn_down_exps.weight", [F, E, X], t.randn(E * F * X, 1.0 / np.sqrt(F)))
            t.mat(p + "ffn_gate_shexp.weight", E, S)
            t.mat(p + "ffn_up_shexp.weight", E, S)
            t.mat(p + "ffn_down_shexp.weight", S, E)
            continue
        t.mat(p + "ffn_gate.weight", E, c["n_ff"])
        t.mat(p + "ffn_up.weight", E, c["n_ff"])
        t.mat(p + "ffn_down.weight", c["n_ff"], E)
    finish(w)
    return V


def write_qwen(path, c):
    w = gguf.GGUFWriter(path, "qwen3next")
    E, D, dk = c["n_embd"], c["head_dim"], c["linear_head_dim"]
    key_dim = c["linear_k_heads"] * dk
    value_dim = c["linear_v_heads"] * dk
    conv_dim = 2 * key_dim + value_dim
    nv = c["linear_v_heads"]
    w.add_name("tiny qwen3next reference model")
    w.add_context_length(c["n_ctx"])
    w.add_embedding_length(E)
    w.add_block_count(c["n_layer"])
    w.add_feed_forward_length(c["n_ff_exp"] * c["n_expert_used"])
    w.add_head_count(c["n_head"])
    w.add_head_count_kv(c["n_head_kv"])
    w.add_key_length(D)
    w.add_value_length(D)
    w.add_layer_norm_rms_eps(c["rms_eps"])
    w.add_rope_freq_base(c["rope_base"])
    w.add_rope_dimension_count(c["rope_dims"])
    w.add_expert_count(c["n_expert"])
    w.add_expert_used_count(c["n_expert_used"])
    w.add_expert_feed_forward_length(c["n_ff_exp"])
    w.add_expert_shared_feed_forward_length(c["n_ff_shexp"])
    w.add_ssm_conv_kernel(c["d_conv"])
    w.add_ssm_state_size(dk)
    w.add_ssm_group_count(c["linear_k_heads"])
    w.add_ssm_time_step_rank(nv)
    w.add_ssm_inner_size(value_dim)
    w.add_full_attention_interval(c["full_attention_interval"])
    V = add_vocab(w)
    t = Tensors(w, c["seed"])
    t.put("token_embd.weight", [E, V], t.randn(E * V, 0.5))
    t.norm("output_norm.weight", E)
    t.mat("output.weight", E, V)
    X, F = c["n_expert"], c["n_ff_exp"]
    for il in range(c["n_layer"]):
        p = "blk.%d." % il
        t.norm(p + "attn_norm.weight", E)
        t.norm(p + "post_attention_norm.weight", E)
        if (il + 1) % c["full_attention_interval"] == 0:
            t.mat(p + "attn_q.weight", E, 2 * c["n_head"] * D)  # [q_h | gate_h] per head
            t.mat(p + "attn_k.weight", E, c["n_head_kv"] * D)
            t.mat(p + "attn_v.weight", E, c["n_head_kv"] * D)
            t.mat(p + "attn_output.weight", c["n_head"] * D, E)
            t.norm(p + "attn_q_norm.weight", D)
            t.norm(p + "attn_k_norm.weight", D)
        else:
            t.mat(p + "attn_qkv.weight", E, conv_dim)
            t.mat(p + "attn_gate.weight", E, value_dim)
            t.mat(p + "ssm_ba.weight", E, 2 * nv)
            t.put(p + "ssm_conv1d.weight", [c["d_conv"], conv_dim], t.randn(c["d_conv"] * conv_dim, 0.5))
            t.put(p + "ssm_dt.bias", [nv], t.dt_bias(nv))
            t.put(p + "ssm_a", [nv], t.ssm_a(nv))
            t.norm(p + "ssm_norm.weight", dk)
            t.mat(p + "ssm_out.weight", value_dim, E)
        t.mat(p + "ffn_gate_inp.weight", E, X)
        t.put(p + "ffn_gate_exps.weight", [E, F, X], t.randn(E * F * X, 1.0 / np.sqrt(E)))
        t.put(p + "ffn_up_exps.weight", [E, F, X], t.randn(E * F * X, 1.0 / np.sqrt(E)))
        t.put(p + "ffn_down_exps.weight", [F, E, X], t.randn(E * F * X, 1.0 / np.sqrt(F)))
        t.put(p + "ffn_gate_inp_shexp.weight", [E], t.randn(E, 1.0 / np.sqrt(E)))
        t.mat(p + "ffn_gate_shexp.weight", E, c["n_ff_shexp"])
        t.mat(p + "ffn_up_shexp.weight", E, c["n_ff_shexp"])
        t.mat(p + "ffn_down_shexp.weight", c["n_ff_shexp"], E)
    finish(w)
    return V


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run_llama(path, tokens, n_batch=256):
    llm = llama_cpp.Llama(model_path=path, n_ctx=256, n_batch=n_batch, n_ubatch=n_batch,
                          logits_all=True, n_threads=2, n_threads_batch=2, seed=0,
                          flash_attn=False, verbose=False)
    llm.eval(tokens)
    scores = np.array(llm.scores[: len(tokens)], dtype=np.float32)
    del llm
    return scores


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7000)
    fixture = {
        "meta": {
            "script": "tests/reference/make_hybrid_fixtures.py",
            "python": platform.python_version(),
            "numpy": np.__version__,
            "gguf": getattr(gguf, "__version__", "0.19.0"),
            "llama_cpp_python": llama_cpp.__version__,
            "system_info": llama_cpp.llama_print_system_info().decode(),
            "llama_cpp_settings": "CPU, n_threads 2, one ubatch of all tokens, logits_all, "
                                  "flash_attn off, f16 K/V cache, f32 recurrent states",
            "token_seed": 7000,
        },
        "models": {},
    }
    for name, cfg, writer in (("granitehybrid", GRANITE, write_granite),
                              ("qwen3next", QWEN, write_qwen),
                              ("granitehybrid_moe", GRANITE_MOE, write_granite)):
        path = os.path.join(OUT, "tiny_%s.gguf" % name)
        V = writer(path, cfg)
        n = 48
        tokens = [2] + [int(t) for t in rng.integers(6, V, size=n - 1)]
        logits = run_llama(path, tokens)
        assert logits.shape == (n, V) and np.all(np.isfinite(logits))
        # llama.cpp against itself: the same tokens one at a time (decode path) and in ubatches
        # of 7, as max |dlogit| / max |logit|.
        spread = {}
        for nb in (1, 7):
            other = run_llama(path, tokens, n_batch=nb)
            spread["n_batch_%d" % nb] = float(np.abs(other - logits).max() / np.abs(logits).max())
        fixture["models"][name] = {
            "file": "tiny_%s.gguf" % name,
            "sha256": sha256(path),
            "config": cfg,
            "n_vocab": V,
            "tokens": tokens,
            # [n_tokens][n_vocab] float32, little-endian, row-major, base64 (exact and compact).
            "logits_f32le_base64": base64.b64encode(logits.astype("<f4").tobytes()).decode(),
            "logits_shape": [n, V],
            "logits_row0_head": [float(v) for v in logits[0, :8]],
            "logit_abs_max": float(np.abs(logits).max()),
            "logit_std": float(logits.std()),
            "llama_cpp_self_spread": spread,
        }
        print(name, "n_vocab", V, "logit std %.3f max %.3f" % (logits.std(), np.abs(logits).max()),
              "self spread", spread, file=sys.stderr)
    with open(os.path.join(OUT, "hybrid_logits.json"), "w") as f:
        json.dump(fixture, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
