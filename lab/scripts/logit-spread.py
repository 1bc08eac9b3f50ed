#!/usr/bin/env python3
"""The float noise of the full model's logits across BLAS kernels, against SEKV's difference to it.

    for c in Cooperlake SkylakeX Haswell Sandybridge Prescott; do
        OPENBLAS_CORETYPE=$c SPANSCOPE_TEST_LOGITS=/tmp/logits-$c.bin build/tests/test_memory_sekv \\
            --gtest_filter=SekvMemory.ForwardPassOfTheRealModelMatchesFullWhenEverySpanExpands
    done
    python3 lab/scripts/logit-spread.py /tmp/logits-*.bin

Each FILE holds the question's last logits of the full model and of SEKV with every span
expanded at full rank (float32, [n_vocab] each, full first), as that test writes them. Prints,
for each file, the largest |SEKV − full| and the largest |full|, then for each pair of files the
largest |full − full|: the reference's own spread, against which the test's bound is set
(docs/sekv.md, "Tests").
"""
import array
import itertools
import sys


def load(path):
    values = array.array("f")
    with open(path, "rb") as f:
        data = f.read()
    if not data or len(data) % 8:
        sys.exit(f"{path}: {len(data)} bytes is not two float32 vectors of one length")
    values.frombytes(data)
    n = len(values) // 2
    return values[:n], values[n:]


def largest_difference(a, b):
    return max(abs(x - y) for x, y in zip(a, b))


def main():
    paths = sys.argv[1:]
    if not paths:
        sys.exit(__doc__)
    logits = {p: load(p) for p in paths}
    if len({len(full) for full, _ in logits.values()}) > 1:
        sys.exit("the files hold logits of different lengths: not one test")
    for p, (full, sekv) in logits.items():
        print(f"{p}: SEKV - full {largest_difference(full, sekv):.4f}, "
              f"largest logit {max(abs(x) for x in full):.2f}")
    for (p, (a, _)), (q, (b, _)) in itertools.combinations(logits.items(), 2):
        print(f"{p} vs {q}: full - full {largest_difference(a, b):.4f}")


if __name__ == "__main__":
    main()
