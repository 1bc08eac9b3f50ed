#!/usr/bin/env bash
# `spanscope FILE… --ask QUESTION` without a display (the README's first command over ssh):
# the window runs offscreen, the files go into the default project, the answer is printed and
# the window saved as spanscope-window.png. A second run reuses the stored document.
#
#   headless_ask.sh SPANSCOPE        exit 0 pass, 1 fail, 77 skipped (no model)
set -uo pipefail
bin="$1"
model="${SPANSCOPE_MODEL:-${XDG_DATA_HOME:-$HOME/.local/share}/spanscope/models/gemma-3-270m-q4_k_m.gguf}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "--- stderr:"; cat "$tmp/err"; exit 1; }
cd "$tmp" || exit 1
# Nothing of the user's: data, settings and runtime files in the scratch directory.
run() {
    env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM SPANSCOPE_MODEL="$model" \
        XDG_DATA_HOME="$tmp/data" XDG_CONFIG_HOME="$tmp/config" XDG_RUNTIME_DIR="$tmp" \
        timeout 600 "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
}
doc=/usr/share/common-licenses/BSD
# Bad arguments exit 2, as the README says, with the reason in one line.
run --no-such-option "$doc"
[[ $? == 2 ]] || fail "an unknown option did not exit 2"
grep -q "no-such-option" "$tmp/err" || fail "an unknown option is not named"
run "$doc" --ask
[[ $? == 2 ]] || fail "--ask without its question did not exit 2"
run --version >/dev/null || fail "--version failed"

if [[ ! -s "$model" ]]; then
    echo "SKIP: the real model is not installed ($model); run bash scripts/setup.sh model"
    exit 77
fi
run --ask "Who holds the copyright?" "$doc" || fail "exit status $? on the first run"
[[ -s "$tmp/out" ]] || fail "no answer printed"
grep -q "running offscreen" "$tmp/err" || fail "the missing display was not reported"
[[ "$(head -c 8 spanscope-window.png | od -An -tx1 | tr -d ' \n')" == 89504e470d0a1a0a ]] ||
    fail "spanscope-window.png is not a PNG"
[[ -s "$tmp/data/spanscope/projects/default.spanscope" ]] || fail "no default project was created"
grep -q "chunks prefilled" "$tmp/err" || fail "no ingest progress on stderr"
first="$(cat "$tmp/out")"

# Again: the document is already stored; every document token is reused.
rm -f spanscope-window.png
run --ask "Who holds the copyright?" "$doc" || fail "exit status $? on the second run"
grep -q "chunks prefilled" "$tmp/err" && fail "the second run prefilled the document again"
stats="$(grep -o '[0-9,]* tokens reused / [0-9,]* computed' "$tmp/err")" || fail "no statistics"
reused="$(echo "$stats" | awk '{print $1}' | tr -d ,)"
((reused > 200)) || fail "only $reused tokens reused: $stats"
[[ "$(cat "$tmp/out")" == "$first" ]] || fail "another answer from the same project: '$first' vs '$(cat "$tmp/out")'"
[[ -f "$tmp/config/Spanscope/spanscope.conf" ]] || fail "settings were not kept with QSettings"
grep -q "default.spanscope" "$tmp/config/Spanscope/spanscope.conf" || fail "the project is not among the recent ones"

# A question without any document: a clear message and a non-zero exit, nothing crashes.
run --project "$tmp/empty.spanscope" --ask "Anything?" && fail "a question without documents succeeded"
grep -qi "document" "$tmp/err" || fail "the refusal does not say why"
# Bad input: each says why in words, exits non-zero, and changes nothing it should not.
run --project "$tmp/p2.spanscope" --ask "Anything?" /nonexistent/file.txt /bin/ls &&
    fail "unreadable files gave an answer"
grep -q "/nonexistent/file.txt: no such file" "$tmp/err" || fail "a missing file is not named with its reason"
grep -q "/bin/ls: is a binary file" "$tmp/err" || fail "a binary file is not named with its reason"
printf 'not a project' >junk.spanscope
run --ask "Anything?" junk.spanscope && fail "a junk project file gave an answer"
grep -q "junk.spanscope" "$tmp/err" || fail "a junk project file is not named"
[[ "$(cat junk.spanscope)" == "not a project" ]] || fail "the junk project file was changed"
[[ "$(grep -c 'saved the window' "$tmp/err")" == 1 ]] || fail "one failure reported more than once"
run --model /bin/ls --ask "Anything?" "$doc" && fail "a model that is no model gave an answer"
grep -q "/bin/ls" "$tmp/config/Spanscope/spanscope.conf" && fail "--model was saved in the settings"
run --ask "   " "$doc"
[[ $? == 2 ]] || fail "a blank question did not exit 2"
grep -q "empty" "$tmp/err" || fail "a blank question is not refused in words"

echo "PASS: answered offscreen ('$first'), then again from the stored document ($stats)"
