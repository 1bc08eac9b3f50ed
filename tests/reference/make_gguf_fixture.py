#!/usr/bin/env python3
"""Dump a GGUF file's metadata and tensor table with gguf-py (an independent reader) to JSON.

tests/unit/test_gguf_real_model.cpp compares Spanscope's reader against this fixture.

    python3 tests/reference/make_gguf_fixture.py MODEL.gguf tests/reference/fixtures/gguf_real_model.json

Needs the PyPI package `gguf` (tested with 0.19.0). Large arrays (the token tables) are
recorded by length plus their first and last few elements only.
"""
import json
import sys

import gguf
from gguf import GGUFReader, GGUFValueType

HEAD = 8  # leading array elements recorded
TAIL = 2  # trailing array elements recorded


def scalar(value_type, part):
    if value_type == GGUFValueType.STRING:
        return bytes(part).decode("utf-8", errors="surrogateescape")
    v = part[0].item() if hasattr(part, "__len__") else part.item()
    if value_type == GGUFValueType.BOOL:
        return bool(v)
    if value_type in (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64):
        return float(v)
    return int(v)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    path, out = sys.argv[1], sys.argv[2]
    r = GGUFReader(path)
    meta = {}
    for key, f in r.fields.items():
        if key.startswith("GGUF."):
            continue  # header fields, recorded separately
        t = f.types[0]
        entry = {"type": t.name.lower()}
        if t == GGUFValueType.ARRAY:
            et = f.types[-1] if len(f.types) > 1 else GGUFValueType.UINT8
            vals = [scalar(et, f.parts[i]) for i in f.data]
            entry["elem_type"] = et.name.lower()
            entry["length"] = len(vals)
            if len(vals) <= HEAD + TAIL:
                entry["values"] = vals
            else:
                entry["head"] = vals[:HEAD]
                entry["tail"] = vals[-TAIL:]
        else:
            entry["value"] = scalar(t, f.parts[f.data[0]])
        meta[key] = entry
    tensors = []
    for t in r.tensors:
        tensors.append({
            "name": t.name,
            "type": int(t.tensor_type),
            "type_name": t.tensor_type.name,
            "ne": [int(d) for d in t.shape],
            "offset": int(t.data_offset - r.data_offset),
            "nbytes": int(t.n_bytes),
        })
    doc = {
        "generator": f"tests/reference/make_gguf_fixture.py with gguf-py {gguf.__version__ if hasattr(gguf, '__version__') else '0.19.0'}",
        "file": path.rsplit("/", 1)[-1],
        "file_size": int(r.data.nbytes),
        "version": int(r.fields["GGUF.version"].parts[-1][0]),
        "alignment": int(r.alignment),
        "data_offset": int(r.data_offset),
        "tensor_count": len(r.tensors),
        "metadata": meta,
        "tensors": tensors,
    }
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, ensure_ascii=True)
        fh.write("\n")


if __name__ == "__main__":
    main()
