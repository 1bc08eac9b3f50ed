#!/usr/bin/env bash
# The direction of the dependencies (docs/architecture.md, "Layers"): every quoted #include of
# the product's code names a folder of its own layer or a lower one, and no product code includes
# the lab. Prints each include that breaks this and exits 1; exits 0 when there is none.
#
#   bash tests/check_layers.sh [SOURCE_DIR]
set -euo pipefail
ROOT="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$ROOT"
# folder: the folders its files may include (its own first).
declare -A may=(
    [engine]="engine"
    [storage]="storage engine"
    [answering]="answering storage engine"
    [ui]="ui answering storage engine"
    [app/gui]="app ui answering storage engine"
    [app/cli]="app/cli answering storage engine"
    [lab]="lab app/cli answering storage engine"
)
bad=0
for folder in "${!may[@]}"; do
    [[ -d "$folder" ]] || continue
    while IFS= read -r line; do
        file="${line%%:*}"
        target="$(sed -E 's/^[^"]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/' <<<"${line#*:*:}")"
        top="${target%%/*}"
        [[ "$target" == */* ]] || continue # a file beside it (kernels' .inc parts, generated headers)
        [[ -d "$top" ]] || continue        # not one of ours
        ok=0
        for allowed in ${may[$folder]}; do
            [[ "$target" == "$allowed"/* ]] && ok=1
        done
        if ((!ok)); then
            echo "$file includes \"$target\": $folder may include only ${may[$folder]}"
            bad=1
        fi
    done < <(grep -rn --include='*.cpp' --include='*.h' --include='*.inc' --include='*.cu' \
                  -E '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$folder" || true)
done
exit "$bad"
