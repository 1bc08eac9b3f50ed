#!/usr/bin/env bash
# validate.sh desktop FILE    desktop-file-validate; any message (error, warning, hint) fails
# validate.sh appstream FILE  appstreamcli validate --no-net --strict; any issue above the
#                             pedantic level (error, warning, info) fails
# Exit 77 (skipped) when the tool is missing.
set -uo pipefail

kind="${1:-}"
file="${2:-}"
if [[ -z "$kind" || -z "$file" ]]; then
    echo "usage: validate.sh desktop|appstream FILE" >&2
    exit 2
fi
if [[ ! -f "$file" ]]; then
    echo "FAIL: $file does not exist" >&2
    exit 1
fi

case "$kind" in
desktop)
    tool=desktop-file-validate
    pkg=desktop-file-utils
    cmd=(desktop-file-validate "$file")
    ;;
appstream)
    tool=appstreamcli
    pkg=appstream
    # --pedantic hints are not failures: one says the reverse-DNS id has capital letters.
    cmd=(appstreamcli validate --no-net --strict --explain "$file")
    ;;
*)
    echo "unknown kind '$kind' (desktop or appstream)" >&2
    exit 2
    ;;
esac

if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool not found (Debian package $pkg)"
    exit 77
fi

echo "+ ${cmd[*]}"
out="$("${cmd[@]}" 2>&1)"
rc=$?
[[ -n "$out" ]] && echo "$out"

if ((rc != 0)); then
    echo "FAIL: $tool exited with $rc on $file" >&2
    exit 1
fi
if [[ "$kind" == desktop && -n "$out" ]]; then
    echo "FAIL: $tool reported problems in $file" >&2
    exit 1
fi
echo "OK: $file"
