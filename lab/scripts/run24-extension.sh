#!/usr/bin/env bash
# Run 24 at 0.625 % per head, more seeds (its pre-registration: docs/results.md, "zoom/run24-extension").
#
#   bash lab/scripts/run24-extension.sh PARAMS OUT_DIR SEED…
#
# For each seed, one row of 20 needle samples (4K unless LENGTH, 35 % budget, τ per query, one
# thread) for each router of ROUTERS: by default the training-free router and the trained router
# read from PARAMS (a zoom parameter file).
# Rows already in OUT_DIR are kept, so a stopped run resumes; a row another instance is running
# (its lock file held) is left to it, so several instances can share one OUT_DIR. JOBS rows run
# at once (default 2, one thread each), 7-12 minutes per row on a 2-core machine. ROUTERS
# (default "training-free trained") picks the routers; "oracle" is the attention-mass
# oracle of --router oracle (rows oracle00625_pq…, a measurement); "uniform" the training-free
# router with plain-mean summary rows (--summary-weights uniform, rows tfu00625_pq…); "rerankN"
# (N in 2-64) the training-free router with two-stage routing (--rerank N, rows tfrN_00625_pq…),
# "trained-rerankN" the trained router with it (rows PREFIXrN_00625_pq…); the training-free,
# uniform, rerank and oracle rows do not need PARAMS.
# LENGTH (tokens, default 4096) sets the context length; rows of another length than 4096 are
# named with it (…_pq_8k_sS-niah.jsonl for 8192; a multiple of 1024); an 8K row takes about three
# times as long. PREFIX (default r24) names the trained rows (PREFIX_00625_pq…), so that another
# parameter file's rows sit beside run 24's. A trained row already in OUT_DIR (finished or stopped) from another PARAMS path is
# refused, never kept or resumed as if it were this file's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CLI="${SPANSCOPE_CLI:-$ROOT/build/lab/spanscope-lab}"
[[ $# -ge 3 ]] || { echo "usage: $0 PARAMS OUT_DIR SEED..." >&2; exit 2; }
PARAMS=$1 OUT=$2; shift 2
ROUTERS=${ROUTERS:-training-free trained}
needs_params=0
for r in $ROUTERS; do
    case $r in
    training-free | oracle | uniform) ;;
    rerank[2-9] | rerank[1-5][0-9] | rerank6[0-4]) ;;
    trained) needs_params=1 ;;
    trained-rerank[2-9] | trained-rerank[1-5][0-9] | trained-rerank6[0-4]) needs_params=1 ;;
    *) echo "unknown router '$r' in ROUTERS (training-free, trained, oracle, uniform, rerankN, trained-rerankN)" >&2; exit 2 ;;
    esac
done
((needs_params == 0)) || [[ -s "$PARAMS" ]] || { echo "no parameter file at $PARAMS" >&2; exit 2; }

row() { # ROUTER SEED
    local name router len=""
    [[ $LENGTH == 4096 ]] || len="_$((LENGTH / 1024))k"
    case $1 in
    # One stage unless the row names two (two-stage routing became the default after these
    # rows were measured; their factors were fp32 then, f16/Q8_0 now: docs/sekv.md).
    training-free) name="tf00625_pq${len}_s$2" router=(--router training-free --rerank 0) ;;
    oracle) name="oracle00625_pq${len}_s$2" router=(--router oracle) ;;
    uniform) name="tfu00625_pq${len}_s$2" router=(--router training-free --summary-weights uniform --rerank 0) ;;
    rerank*) name="tfr${1#rerank}_00625_pq${len}_s$2" router=(--router training-free --rerank "${1#rerank}") ;;
    trained) name="${PREFIX}_00625_pq${len}_s$2" router=(--router trained --zoom-params "$PARAMS" --rerank 0) ;;
    trained-rerank*) name="${PREFIX}r${1#trained-rerank}_00625_pq${len}_s$2"
        router=(--router trained --zoom-params "$PARAMS" --rerank "${1#trained-rerank}") ;;
    *) echo "unknown router '$1' in ROUTERS (training-free, trained, oracle, uniform, rerankN, trained-rerankN)" >&2; return 1 ;;
    esac
    local f
    for f in "$OUT/$name-niah.jsonl" "$OUT/$name.part-niah.jsonl"; do
        if [[ $1 == trained* && -s $f ]] && ! head -1 "$f" | grep -qF -- "--zoom-params $PARAMS "; then
            echo "$f was measured with another parameter file than $PARAMS: move it away" >&2
            return 1
        fi
    done
    [[ -s "$OUT/$name-niah.jsonl" ]] && return 0
    exec {lock}>"$OUT/$name.lock"
    flock -n "$lock" || return 0 # another instance runs this row
    [[ -s "$OUT/$name-niah.jsonl" ]] && return 0
    "$CLI" eval niah --haystack prose --lengths "$LENGTH" --samples 20 \
        --depths 0,10,20,30,40,50,60,70,80,90,100 --policy sekv --expand-rate 0.00625 \
        --tau-per-query --budget 0.35 --threads 1 --seed "$2" --quiet "${router[@]}" \
        --out "$OUT/$name.part-niah.jsonl" || { echo "row $name failed" >&2; return 1; } # stays .part, resumes
    mv "$OUT/$name.part-niah.jsonl" "$OUT/$name-niah.jsonl"
}

export -f row
LENGTH=${LENGTH:-4096}
[[ $LENGTH =~ ^[1-9][0-9]*$ ]] && ((LENGTH % 1024 == 0)) ||
    { echo "LENGTH must be a multiple of 1024 tokens, not '$LENGTH'" >&2; exit 2; }
PREFIX=${PREFIX:-r24}
[[ $PREFIX =~ ^[a-z][a-z0-9]*$ ]] || { echo "PREFIX must be lower-case letters and digits, not '$PREFIX'" >&2; exit 2; }
[[ $PREFIX != tf* && $PREFIX != oracle* ]] ||
    { echo "PREFIX '$PREFIX' would name trained rows like the training-free or oracle ones" >&2; exit 2; }
export CLI PARAMS OUT LENGTH PREFIX
mkdir -p "$OUT"
for seed in "$@"; do
    for router in $ROUTERS; do echo "$router $seed"; done
done | xargs -P "${JOBS:-2}" -L 1 bash -c 'row "$0" "$1"'
