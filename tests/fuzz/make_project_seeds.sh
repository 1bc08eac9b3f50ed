#!/usr/bin/env bash
# Writes the seed corpus of the project fuzz target (fuzz_project): small project files written
# by Spanscope itself, then damaged copies of one.
#
#   bash tests/fuzz/make_project_seeds.sh SPANSCOPE_CLI MODEL.gguf [CORPUS_DIR]
#
# SPANSCOPE_CLI is build/app/cli/spanscope-cli; MODEL is any small GGUF model it runs (the tiny
# test models written by tests/unit/tiny_model.cpp are enough: the answer's words do not
# matter). CORPUS_DIR defaults to tests/fuzz/corpus. Seeds:
#   ingested_chat.spanscope   a document ingested (16-token chunks), one question asked: chunks,
#                             the full-text index, a chat with its answer's sources, zoom trace
#                             and segmentation; of the chunk states only the last chunk's tail
#                             is kept (states are kilobytes each)
#   fixture_v1..v4.spanscope  tests/fixtures/project_v*.spanscope (schemas 1 to 4: migrations)
#   truncated.spanscope       the first 4 KiB of ingested_chat
#   bad_page_size.spanscope   ingested_chat with the header's page size 768 (not a power of two)
#   newer_schema.spanscope    ingested_chat claiming schema version 99
#   foreign_sqlite.spanscope  an SQLite database that is not a project
# Each is rewritten with 512-byte pages and VACUUM (rollback journal; Project::open turns WAL
# on again) so that it stays about 20 KiB. Needs sqlite3(1) and python3.
set -euo pipefail
cli=$1 model=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${3:-"$src/tests/fuzz/corpus"}/project
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

shrink() { # FILE: 512-byte pages, no free pages, no WAL
    sqlite3 "$1" "PRAGMA journal_mode = DELETE; PRAGMA page_size = 512; VACUUM;" >/dev/null
}

printf 'Spanscope keeps long documents.\nThe second line talks about attention.\n\nA third paragraph with more words to chunk.\n' >"$tmp/doc.txt"
p="$tmp/ingested.spanscope"
"$cli" ingest --project "$p" --model "$model" --threads 1 --chunk-tokens 16 "$tmp/doc.txt" >/dev/null
"$cli" ask --project "$p" --model "$model" --threads 1 --max-tokens 4 \
    "What does the document say about attention?" >/dev/null
sqlite3 "$p" "PRAGMA foreign_keys = ON;
  DELETE FROM chunk_states WHERE NOT (chunk_id = (SELECT MAX(chunk_id) FROM chunk_states)
                                      AND kind = 2);" >/dev/null
shrink "$p"
cp "$p" "$out/ingested_chat.spanscope"

for v in 1 2 3 4; do
    cp "$src/tests/fixtures/project_v$v.spanscope" "$tmp/v$v.spanscope"
    shrink "$tmp/v$v.spanscope"
    cp "$tmp/v$v.spanscope" "$out/fixture_v$v.spanscope"
done

head -c 4096 "$p" >"$out/truncated.spanscope"
python3 - "$p" "$out/bad_page_size.spanscope" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[16:18] = (768).to_bytes(2, "big")  # the page size field of the database header
open(sys.argv[2], "wb").write(bytes(b))
EOF
cp "$p" "$tmp/newer.spanscope"
sqlite3 "$tmp/newer.spanscope" "UPDATE schema_version SET version = 99;"
cp "$tmp/newer.spanscope" "$out/newer_schema.spanscope"
sqlite3 "$tmp/foreign.sqlite" "PRAGMA page_size = 512; CREATE TABLE t(x); INSERT INTO t VALUES (1);"
cp "$tmp/foreign.sqlite" "$out/foreign_sqlite.spanscope"
ls -l "$out"
