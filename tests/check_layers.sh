#!/usr/bin/env bash
# The direction of the dependencies (docs/architecture.md, "Layers"): every #include ("…" or <…>)
# in the product's and the lab's code that names one of our folders names its own layer or a lower
# one, and no product code includes the lab. Prints each include that breaks this and exits 1;
# exits 0 when there is none; exits 2 when SOURCE_DIR is not the repository.
#
#   bash tests/check_layers.sh [SOURCE_DIR]
#   bash tests/check_layers.sh --self-test     # plants violations in a scratch tree: must fail
set -euo pipefail
if [[ "${1:-}" == --self-test ]]; then
    scratch="$(mktemp -d)"
    trap 'rm -rf "$scratch"' EXIT
    mkdir -p "$scratch"/{engine/kernels,storage,answering,ui,app/cli,app/gui,app/tools,lab}
    check() { # expect exit 1 for one planted include in FILE
        local file=$1 line=$2
        rm -rf "$scratch"/*/*.h "$scratch"/*/*/*.h* "$scratch"/*/*/*.cu*
        printf '%s\n' "$line" >"$scratch/$file"
        if bash "${BASH_SOURCE[0]}" "$scratch" >/dev/null; then
            echo "self-test: $file with '$line' passed the check" >&2
            exit 1
        fi
    }
    check engine/kernels/a.h '#include "storage/project.h"'
    check engine/kernels/a.h '#include <ui/main_window.h>'
    check engine/kernels/a.cuh '#include"answering/x.h"'
    check storage/a.h '#  include "answering/x.h"'
    check answering/a.h '#include "ui/x.h"'
    check ui/a.h '#include "app/gui/x.h"'
    check app/cli/a.h '#include "ui/x.h"'
    check app/tools/a.h '#include "lab/x.h"'
    check lab/a.h '#include "app/gui/x.h"'
    bash "${BASH_SOURCE[0]}" "$scratch" >/dev/null 2>&1 || true
    rm -rf "$scratch"/*/*.h "$scratch"/*/*/*.h* "$scratch"/*/*/*.cu*
    printf '#include "engine/kernels/a.h"\n' >"$scratch/ui/ok.h"
    bash "${BASH_SOURCE[0]}" "$scratch" || { echo "self-test: a good include was refused" >&2; exit 1; }
    echo "self-test: every planted include was caught"
    exit 0
fi
ROOT="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
[[ -d "$ROOT/engine" ]] || { echo "check_layers: $ROOT has no engine/ folder" >&2; exit 2; }
cd "$ROOT"
# The layers, highest first; the folders each may include. A file takes the rule of the longest
# prefix of its path (app/cli before app).
rules=(
    "app/cli:app/cli answering storage engine"
    "app:app ui answering storage engine"
    "lab:lab app/cli answering storage engine"
    "ui:ui answering storage engine"
    "answering:answering storage engine"
    "storage:storage engine"
    "engine:engine"
)
ours="engine storage answering ui app lab"
bad=0
while IFS= read -r line; do
    file="${line%%:*}"
    text="${line#*:*:}"
    target="$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^">]+)[">].*/\1/' <<<"$text")"
    top="${target%%/*}"
    [[ "$target" == */* && " $ours " == *" $top "* ]] || continue # not one of our folders
    allowed=""
    for r in "${rules[@]}"; do
        prefix="${r%%:*}"
        if [[ "$file" == "$prefix"/* ]]; then
            allowed="${r#*:}"
            break
        fi
    done
    ok=0
    for a in $allowed; do
        [[ "$target" == "$a"/* ]] && ok=1
    done
    if ((!ok)); then
        echo "$file includes \"$target\": ${file%%/*} may include only $allowed"
        bad=1
    fi
done < <(for d in $ours; do
    [[ -d "$d" ]] || continue
    grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$d" \
        --include='*.cpp' --include='*.cc' --include='*.c' --include='*.h' --include='*.hpp' \
        --include='*.inc' --include='*.cu' --include='*.cuh' || true
done)
exit "$bad"
