#!/usr/bin/env python3
"""Write the fuzz seed corpus (tests/fuzz/corpus/gguf/*.gguf) with gguf-py, an independent writer.

    python3 tests/fuzz/make_corpus.py tests/fuzz/corpus/gguf

Quantised tensors are given as bytes, shape (rows, bytes per row), as gguf-py expects.
Seeds are kept tiny (< 2 KiB) so that libFuzzer mutates structure, not tensor payloads.
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V
from gguf import GGUFWriter


def write(path, arch, fill, alignment=None):
    w = GGUFWriter(path, arch)
    if alignment is not None:
        w.data_alignment = alignment
        w.add_uint32("general.alignment", alignment)
    fill(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def small(w):
    w.add_uint32("tiny.block_count", 2)
    w.add_tensor("a", np.arange(8, dtype=np.float32))
    w.add_tensor("b", np.ones((2, 4), dtype=np.float32))


def all_types(w):
    w.add_key_value("t.u8", 7, V.UINT8)
    w.add_key_value("t.i8", -7, V.INT8)
    w.add_key_value("t.u16", 700, V.UINT16)
    w.add_key_value("t.i16", -700, V.INT16)
    w.add_key_value("t.u32", 70000, V.UINT32)
    w.add_key_value("t.i32", -70000, V.INT32)
    w.add_key_value("t.f32", 0.5, V.FLOAT32)
    w.add_key_value("t.bool", True, V.BOOL)
    w.add_key_value("t.str", "hello", V.STRING)
    w.add_key_value("t.u64", 2**40, V.UINT64)
    w.add_key_value("t.i64", -(2**40), V.INT64)
    w.add_key_value("t.f64", 0.25, V.FLOAT64)
    w.add_array("a.str", ["<pad>", "<eos>", "x"])
    w.add_array("a.f32", [0.0, -1.0, 2.5])
    w.add_array("a.i32", [1, -2, 3])
    w.add_array("a.bool", [True, False])
    w.add_tensor("f16", np.ones(4, dtype=np.float16))
    w.add_tensor("q8_0", np.zeros((2, 34), dtype=np.uint8), raw_dtype=Q.Q8_0)
    w.add_tensor("q4_K", np.zeros((1, 144), dtype=np.uint8), raw_dtype=Q.Q4_K)
    w.add_tensor("q5_0.3d", np.zeros((2, 1, 22), dtype=np.uint8), raw_dtype=Q.Q5_0)


def meta_only(w):
    w.add_string("general.name", "metadata only")
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "c"])


def aligned64(w):
    w.add_tensor("x", np.arange(3, dtype=np.float32))
    w.add_tensor("y", np.zeros((1, 34), dtype=np.uint8), raw_dtype=Q.Q8_0)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "small.gguf"), "tiny", small)
    write(os.path.join(out, "all_types.gguf"), "tiny", all_types)
    write(os.path.join(out, "meta_only.gguf"), "tiny", meta_only)
    write(os.path.join(out, "aligned64.gguf"), "tiny", aligned64, alignment=64)


if __name__ == "__main__":
    main()
