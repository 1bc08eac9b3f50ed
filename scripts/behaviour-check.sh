#!/usr/bin/env bash
# Answers and counts of `spanscope-cli ask --json` on fixed prompts, without the timings: run it
# before and after a change that must not change behaviour (a restructuring) and compare the two
# files, which must be equal byte for byte.
#
#   bash scripts/behaviour-check.sh OUT.json        # then: cmp BEFORE.json AFTER.json
#
# Cases (the default model, 2 threads, 24 answer tokens, greedy): the GPL-3 of base-files asked
# under every memory policy `ask --policy` offers, then a project holding the GPL-3 and the
# Apache-2.0 licence asked under every LinearKV selector `ask --selector` offers. Statistics that
# measure time or memory use (milliseconds, per-second rates, resident set sizes) are dropped;
# every count, answer and stop reason is kept.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:?usage: behaviour-check.sh OUT.json}"
CLI="${SPANSCOPE_CLI:-$ROOT/build/app/cli/spanscope-cli}"
[[ -x "$CLI" ]] || { echo "no $CLI: run bash scripts/setup.sh build first" >&2; exit 1; }
DOC=/usr/share/common-licenses/GPL-3
DOC2=/usr/share/common-licenses/Apache-2.0
Q="What must you do when you convey a modified version?"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

policies=(full sekv chunk_summary snapkv h2o streaming)
selectors=(none epic full)
for p in "${policies[@]}"; do
    "$CLI" ask --json --threads 2 --max-tokens 24 --policy "$p" --doc "$DOC" "$Q" \
        >"$TMP/policy-$p.json"
done
"$CLI" ingest --threads 2 --project "$TMP/p.spanscope" "$DOC" "$DOC2" >/dev/null 2>&1
for s in "${selectors[@]}"; do
    "$CLI" ask --json --threads 2 --max-tokens 24 --project "$TMP/p.spanscope" --policy full --selector "$s" \
        "$Q" >"$TMP/selector-$s.json"
done

python3 - "$TMP" "$OUT" <<'PY'
import json, os, re, sys
tmp, out = sys.argv[1], sys.argv[2]
timing = re.compile(r"(_ms$|_per_s$|seconds|rss|elapsed|chat_id)")
def clean(v):
    if isinstance(v, dict):
        return {k: clean(x) for k, x in sorted(v.items()) if not timing.search(k)}
    if isinstance(v, list):
        return [clean(x) for x in v]
    return v
cases = {f[:-5]: clean(json.load(open(os.path.join(tmp, f)))) for f in sorted(os.listdir(tmp)) if f.endswith(".json")}
json.dump(cases, open(out, "w"), indent=1, sort_keys=True, ensure_ascii=False)
print(f"{len(cases)} cases written to {out}")
PY
