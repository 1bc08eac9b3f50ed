#!/bin/bash
# The GPU check of issue 9 in one run: the backend parity tests, then prefill and decode speed,
# SEKV's memory and the time to first token of a reopened project, on the CUDA backend and on
# the CPU for comparison. Every result goes to $OUT (default gpu-results/):
#   parity.xml / parity.log    the parity tests (CudaParity.*, CudaModelParity.*, Backend.*)
#   sekv.xml                   SEKV on the GPU against SEKV on the host (CudaSekv.*)
#   sanitizer.log              compute-sanitizer memcheck, racecheck, synccheck of those tests
#   bench-<backend>-<policy>.json   spanscope-cli bench --json at 8K, 16K and 32K tokens
#   reopen-<backend>.json      ask --project on a project ingested before (the stored states)
#   machine.txt                nvidia-smi, the driver and the commit
# Programs come from $BIN (default build/; or .gpu/bin with its libraries in .gpu/lib, from
# scripts/gpu-bundle.sh, unpacked from .gpu/bundle.tar.xz when only that came). The model is
# $MODEL, else the pieces $MODEL_PARTS/model.part-* (default .gpu/) joined and checked against
# .gpu/model.sha256.
# Usage (repository root):  bash scripts/gpu-check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
if [ ! -d .gpu/bin ] && [ -f .gpu/bundle.tar.xz ]; then
    tar -C .gpu -xJf .gpu/bundle.tar.xz
fi
# cuBLAS is loaded at run time (libcublas.so.13): the toolkit's folder must be searched.
export LD_LIBRARY_PATH=${CUDA_HOME:-/usr/local/cuda}/lib64:${LD_LIBRARY_PATH:-}
# On this machine a parity test must run, not skip (test_cuda_parity.cpp).
export SPANSCOPE_REQUIRE_GPU=1
if [ -d .gpu/bin ]; then
    BIN=${BIN:-.gpu/bin}
    export LD_LIBRARY_PATH=$PWD/.gpu/lib:$LD_LIBRARY_PATH
    CLI=$BIN/spanscope-cli
    PARITY=$BIN/test_cuda_parity
    SEKV_TEST=$BIN/test_cuda_sekv
    BACKEND_TEST=$BIN/test_backend
else
    BIN=${BIN:-build}
    CLI=$BIN/app/cli/spanscope-cli
    PARITY=$BIN/tests/test_cuda_parity
    SEKV_TEST=$BIN/tests/test_cuda_sekv
    BACKEND_TEST=$BIN/tests/test_backend
fi
{ nvidia-smi || true; git rev-parse HEAD 2>/dev/null || true; } > "$OUT/machine.txt" 2>&1

status=0
echo "== parity tests"
"$PARITY" --gtest_output=xml:"$OUT/parity.xml" 2>&1 | tee "$OUT/parity.log" || status=1
"$SEKV_TEST" --gtest_output=xml:"$OUT/sekv.xml" 2>&1 | tee -a "$OUT/parity.log" || status=1
# Races between the copy and compute streams and out-of-bounds accesses, where the toolkit has
# its sanitizer (a few seconds each on these tests).
SANITIZER=$(command -v compute-sanitizer || ls "${CUDA_HOME:-/usr/local/cuda}"/{bin,compute-sanitizer}/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$SANITIZER" ]; then
    for tool in memcheck racecheck synccheck; do
        echo "== compute-sanitizer --tool $tool" >> "$OUT/sanitizer.log"
        timeout 150 "$SANITIZER" --tool $tool --error-exitcode 9 "$SEKV_TEST" >> "$OUT/sanitizer.log" 2>&1 || status=1
    done
else
    echo "no compute-sanitizer on this machine" > "$OUT/sanitizer.log"
fi
"$BACKEND_TEST" --gtest_filter='Backend.TheCpu*:Backend.Loading*' 2>&1 | tee -a "$OUT/parity.log" || status=1

MODEL=${MODEL:-}
PARTS=${MODEL_PARTS:-.gpu} # where the pieces are (earlier calls may have left them elsewhere)
if [ -z "$MODEL" ] && ls "$PARTS"/model.part-* > /dev/null 2>&1; then
    MODEL=/tmp/gemma-3-270m-q4_k_m.gguf
    cat "$PARTS"/model.part-* > "$MODEL"
    if [ -f .gpu/model.sha256 ] && [ "$(sha256sum "$MODEL" | awk '{print $1}')" != "$(cat .gpu/model.sha256)" ]; then
        echo "the joined model does not match .gpu/model.sha256: a piece is missing" >&2
        exit 1
    fi
fi
if [ -z "$MODEL" ] || [ ! -f "$MODEL" ]; then
    echo "no model (MODEL or .gpu/model.part-*): the benchmarks are not run" | tee "$OUT/bench-skipped.txt"
    exit $status
fi

echo "== benchmarks"
# 32736 + 32 decoded tokens = the model's 32768-token context.
for backend in cuda cpu; do
    for policy in full sekv; do
        lengths=8192,16384,32736
        [ $backend = cpu ] && lengths=8192 # the CPU for scale only
        router=()
        [ $policy = sekv ] && router=(--router training-free)
        timeout 240 "$CLI" bench --model "$MODEL" --backend $backend --policy $policy \
            "${router[@]}" --lengths $lengths --decode-tokens 32 --json \
            > "$OUT/bench-$backend-$policy.json" 2> "$OUT/bench-$backend-$policy.err" || status=1
    done
done

echo "== reopened project"
PROJ=/tmp/gpu-check.spanscope
rm -f "$PROJ"
DOC=/usr/share/common-licenses/GPL-3
[ -f "$DOC" ] || DOC=README.md
"$CLI" ingest --model "$MODEL" --backend cuda --project "$PROJ" "$DOC" > "$OUT/ingest.log" 2>&1 || status=1
# The same question on both backends: the time to first token from the stored states, and
# the greedy answers, which should agree (f16 activations on the GPU could overflow where the
# CPU's fp32 does not: a difference here is the first sign).
for backend in cuda cpu; do
    "$CLI" ask --model "$MODEL" --backend $backend --project "$PROJ" --max-tokens 24 --json \
        "What does the license say about warranty?" \
        > "$OUT/reopen-$backend.json" 2> "$OUT/reopen-$backend.err" || status=1
done
python3 - "$OUT" <<'PY' || status=1
import json, sys
out = sys.argv[1]
a = [json.load(open(f"{out}/reopen-{b}.json"))["answer"] for b in ("cuda", "cpu")]
print("greedy answers agree" if a[0] == a[1] else f"greedy answers differ: cuda {a[0]!r} cpu {a[1]!r}")
sys.exit(0 if a[0] == a[1] else 1)
PY
exit $status
