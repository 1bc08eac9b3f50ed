#!/bin/bash
# The pipeline of issue 8 (SEKV's trained zoom-in), every step resumable: recordings of the
# frozen model on the vim user manual, with recall probes (zoom-record), training (zoom-train, from its
# checkpoint), the loss curves (spanscope-report --curves), then the evaluation of sekv with the
# trained router against sekv with the training-free one and full, at equal fast-tier budgets
# (eval appends to its files and skips the samples already there).
# Usage (from the repository root, after `bash scripts/setup.sh test` built build/):
#   bash lab/scripts/run-zoom.sh record|train|curves|install|report
#   bash lab/scripts/run-zoom.sh 4096|8192|16384 [niah|qa]   (both tasks if none is named)
# record, train: the data (~0.4 GiB of recordings, the checkpoint) go to $ZOOM_DATA
# (default ~/.local/share/spanscope/zoom-data); install copies the trained parameter file to
# resources/zoom/, where it makes `trained` the default router for the model. The evaluation
# measures the shipped file, or TRAINED=FILE before installing it; the trained router expands
# RATE (default 0.175, the rate run 17 was evaluated at) of the spans per head, the
# training-free one its default (0.2), and its rows go to their own files ($OUT/trained/), one
# parameter file's and one rate's at a time (the report does not tell two rates apart).
set -euo pipefail
cd "$(dirname "$0")/../.."
CLI=${CLI:-build/lab/spanscope-lab}
REPORT=${REPORT:-build/lab/report/spanscope-report}
THREADS=${THREADS:-2}
DATA=${ZOOM_DATA:-$HOME/.local/share/spanscope/zoom-data}
OUT=${OUT:?set OUT=DIR, the folder for the result lines (kept out of the repository; a run resumes from what is there)}
PARAMS=$DATA/gemma-3-270m-q4_k_m.zoom.gguf
SHIPPED=resources/zoom/gemma-3-270m-q4_k_m.zoom.gguf
# The parameter file the evaluation measures: the shipped one, or TRAINED=FILE to measure a
# file before installing it.
TRAINED=${TRAINED:-$SHIPPED}
RATE=${RATE:-0.175}
mkdir -p "$OUT/trained" "$DATA"
# τ on the question and one stage, the defaults when this comparison was measured.
EVAL=(--budget 0.35,0.2 --threads "$THREADS" --seed 1 --quiet --tau-on-question --rerank 0)
DEPTHS=0,10,20,30,40,50,60,70,80,90,100

# One task at one length: full and the training-free sekv in one run (one prefill per sample),
# then the trained sekv.
eval_task() {
    local file=$1
    shift
    "$CLI" eval "$@" --policy full,sekv --router training-free "${EVAL[@]}" --out "$OUT/$file"
    "$CLI" eval "$@" --policy sekv --router trained --zoom-params "$TRAINED" \
        --expand-rate "$RATE" "${EVAL[@]}" --out "$OUT/trained/$file"
}

run_length() {
    local len=$1 samples=$2 task=${3:-}
    if [ -z "$task" ] || [ "$task" = niah ]; then
        eval_task niah-prose.jsonl niah --haystack prose --lengths "$len" \
            --samples "$samples" --depths "$DEPTHS"
    fi
    if [ -z "$task" ] || [ "$task" = qa ]; then
        eval_task qa.jsonl qa --qa-set tests/qa/questions.json --lengths "$len" \
            --samples "$samples" --depths "$DEPTHS"
    fi
}

case "${1:-}" in
    record) "$CLI" zoom-record --out "$DATA/records" --recall-probes 16 --probe-tokens 32 \
                --threads "$THREADS" ;;
    train) "$CLI" zoom-train --records "$DATA/records" --out "$PARAMS" \
               --curves "$OUT/curves.jsonl" --threads "$THREADS" --quiet ;;
    curves) "$REPORT" --title "SEKV trained zoom-in: training" --out-dir "$OUT/curves" \
                --curves "$OUT/curves.jsonl" ;;
    install) mkdir -p resources/zoom && cp "$PARAMS" "$SHIPPED" ;;
    4096) run_length 4096 20 "${2:-}" ;;
    8192) run_length 8192 10 "${2:-}" ;;
    16384) run_length 16384 6 "${2:-}" ;;
    report) "$REPORT" --title "SEKV: trained against training-free zoom-in" --out-dir "$OUT" \
                "$OUT"/niah-prose.jsonl "$OUT"/qa.jsonl "$OUT"/trained/*.jsonl ;;
    *) echo "usage: $0 record|train|curves|install|report, or 4096|8192|16384 [niah|qa]" >&2
       exit 2 ;;
esac
