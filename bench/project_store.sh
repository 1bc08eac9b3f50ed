#!/usr/bin/env bash
# Cold ask versus ingest + warm ask on one long document (docs/project-store.md).
#
#   bash bench/project_store.sh [BUILD_DIR] [MIN_TOKENS]
#
# The document is the first chapters of the vim user manual (Debian's vim-runtime) joined until
# it holds at least MIN_TOKENS tokens (default 16000; counted from `ingest --json`). Prints the
# cold and warm JSON statistics, the TTFT ratio and the bytes stored per token.
set -euo pipefail
BUILD="${1:-build}"
MIN_TOKENS="${2:-16000}"
CLI="$BUILD/app/cli/spanscope-cli"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
DOC="$WORK/vim-user-manual.txt"
Q="Which command quits Vim without saving the changes?"

: >"$DOC"
for f in /usr/share/vim/vim90/doc/usr_{01..45}.txt; do
    [[ -f "$f" ]] || continue
    cat "$f" >>"$DOC"
    # ~3.3 bytes per token for this text; stop once comfortably past the target.
    (($(stat -c %s "$DOC") > MIN_TOKENS * 4)) && break
done
echo "document: $(stat -c %s "$DOC") bytes from $(ls /usr/share/vim/vim90/doc/usr_*.txt | head -1 | xargs dirname)"

echo "== cold: ask --doc (prefills the document)"
/usr/bin/time -f "%e s wall, %M KiB peak RSS" "$CLI" ask --json --doc "$DOC" "$Q" | tee "$WORK/cold.json"
echo "== ingest"
/usr/bin/time -f "%e s wall, %M KiB peak RSS" "$CLI" ingest --json --project "$WORK/p.spanscope" "$DOC" | tee "$WORK/ingest.json"
echo "== warm: ask --project in a fresh process"
/usr/bin/time -f "%e s wall, %M KiB peak RSS" "$CLI" ask --json --project "$WORK/p.spanscope" "$Q" | tee "$WORK/warm.json"
"$CLI" project info --project "$WORK/p.spanscope"
python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
cold = json.load(open(w + "/cold.json")); warm = json.load(open(w + "/warm.json"))
docs = json.load(open(w + "/ingest.json"))
print(f"document tokens: {docs[0]['tokens']} in {docs[0]['chunks']} chunks")
print(f"cold TTFT {cold['stats']['ttft_ms']:.0f} ms, warm TTFT {warm['stats']['ttft_ms']:.0f} ms "
      f"({100 * warm['stats']['ttft_ms'] / cold['stats']['ttft_ms']:.2f} %)")
print(f"warm tokens_reused {warm['stats']['tokens_reused']}, tokens_computed {warm['stats']['tokens_computed']}")
print(f"answers identical: {cold['answer'] == warm['answer']} ({cold['answer']!r})")
PY
