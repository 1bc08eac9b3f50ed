#!/bin/bash
# The measurement of issue 7 (LinearKV) on Gemma 3 270M, resumable: every command appends its
# JSON lines to a file in $OUT and skips the samples already there, so this
# script can be stopped and run again until everything is measured.
#   needles: a needle in one of the documents (the line's answer_document says which);
#   qa:      a question whose answer is in one of the documents, the others around it.
# Each sample: a cold prefill of the whole context answers first (the reference, `full`
# recompute), then none, and epic and cacheblend at each recompute ratio, from the documents'
# own caches. The summary lines give quality recovered (% of the cold answer's score) and time
# to first token as a share of the cold prefill's.
# Samples per document count: 20 at 4096 tokens, 10 at 8192, 3 at 16384 (a 16K sample, its
# cold prefill and the nine reuse configurations, takes about 6.5 min on one thread of the
# 2-core machine; the whole 16K set about 2 h).
# Usage (from the repository root, after `bash scripts/setup.sh test` built build/):
#   bash lab/scripts/run-linearkv.sh [4096|8192|16384|all|report]
# `report` renders $OUT/report.md (spanscope-report's LinearKV section) and
# the same per length in $OUT/by-length/LEN/report.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
CLI=${CLI:-build/lab/spanscope-lab}
REPORT=${REPORT:-build/lab/report/spanscope-report}
OUT=${OUT:?set OUT=DIR, the folder for the result lines (kept out of the repository; a run resumes from what is there)}
mkdir -p "$OUT"
COMMON=(--documents 2,4,8 --selector none,epic,cacheblend --recompute 0.05,0.1,0.2,0.4
        --seed 1 --threads "${THREADS:-2}" --quiet)

run_length() {
    local len=$1 samples=$2
    "$CLI" pic-eval niah --lengths "$len" --samples "$samples" \
        --depths 0,10,20,30,40,50,60,70,80,90,100 "${COMMON[@]}" --out "$OUT/pic-niah.jsonl"
    "$CLI" pic-eval qa --qa-set tests/qa/questions.json --lengths "$len" --samples "$samples" \
        "${COMMON[@]}" --out "$OUT/pic-qa.jsonl"
}

case "${1:-all}" in
    4096) run_length 4096 20 ;;
    8192) run_length 8192 10 ;;
    16384) run_length 16384 3 ;;
    all) run_length 4096 20; run_length 8192 10; run_length 16384 3 ;;
    report)
        "$REPORT" --title "Spanscope: position-independent caching (LinearKV)" \
            --out-dir "$OUT" "$OUT"/*.jsonl
        # The same per length (both tasks and the document counts pooled): the lines of one
        # target length, run headers kept, into $OUT/by-length/LEN/.
        for len in 4096 8192 16384; do
            mkdir -p "$OUT/by-length/$len"
            for f in "$OUT"/pic-*.jsonl; do
                python3 -c 'import json, sys
n = int(sys.argv[1])
for line in open(sys.argv[2]):
    j = json.loads(line)
    if "index" not in j or j.get("target_length") == n:
        sys.stdout.write(line)' "$len" "$f" > "$OUT/by-length/$len/$(basename "$f")"
            done
            "$REPORT" --title "LinearKV at $len tokens" --out-dir "$OUT/by-length/$len" \
                "$OUT/by-length/$len"/*.jsonl
            rm "$OUT/by-length/$len"/*.jsonl
        done ;;
    *) echo "usage: $0 [4096|8192|16384|all|report]" >&2; exit 2 ;;
esac
