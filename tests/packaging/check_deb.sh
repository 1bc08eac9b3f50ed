#!/usr/bin/env bash
# Build the Debian package from an already built tree and check it:
#
#   check_deb.sh --cpack CPACK --build-dir BUILD --version X.Y.Z --cli PATH (--gui PATH | --no-gui)
#
# Runs cpack -G DEB into a scratch directory, checks the file name, control fields (Depends
# derived by dpkg-shlibdeps), contents, then extracts it and runs usr/bin/spanscope-cli --help
# and (with the GUI) usr/bin/spanscope --version on the offscreen Qt platform.
# The binaries must be built first (cmake --build BUILD). Exit 0 pass, 1 fail, 77 skipped (a
# tool is missing), 2 usage.
set -uo pipefail

usage() {
    sed -n '2,10p' "$0" >&2
    exit 2
}

cpack="" build="" version="" cli="" gui="" gui_set=0
while (($#)); do
    case "$1" in
    --cpack) cpack="${2:-}"; shift 2 ;;
    --build-dir) build="${2:-}"; shift 2 ;;
    --version) version="${2:-}"; shift 2 ;;
    --cli) cli="${2:-}"; shift 2 ;;
    --gui) gui="${2:-}"; gui_set=1; shift 2 ;;
    --no-gui) gui=""; gui_set=1; shift ;;
    *) usage ;;
    esac
done
[[ -n "$cpack" && -n "$build" && -n "$version" && -n "$cli" && $gui_set == 1 ]] || usage

failures=0
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# Tools: cpack, dpkg-deb, dpkg-shlibdeps (dpkg-dev) and file (CPack's shlibdeps step needs it).
missing=()
[[ -x "$cpack" ]] || missing+=("$cpack (cmake)")
command -v dpkg >/dev/null || missing+=("dpkg (dpkg)")
command -v dpkg-deb >/dev/null || missing+=("dpkg-deb (dpkg)")
command -v dpkg-shlibdeps >/dev/null || missing+=("dpkg-shlibdeps (dpkg-dev)")
command -v file >/dev/null || missing+=("file (file)")
if ((${#missing[@]})); then
    echo "SKIP: missing tools (Debian package in parentheses): ${missing[*]}"
    exit 77
fi

# What cpack packs must have been built.
[[ -f "$build/CPackConfig.cmake" ]] || { echo "FAIL: $build/CPackConfig.cmake not found (configure first)" >&2; exit 1; }
for bin in "$cli" ${gui:+"$gui"}; do
    [[ -x "$bin" ]] || { echo "FAIL: $bin is not built; run cmake --build $build before this test" >&2; exit 1; }
done

scratch="$(mktemp -d "${TMPDIR:-/tmp}/spanscope-deb.XXXXXX")" || exit 1
trap 'rm -rf "$scratch"' EXIT

arch="$(dpkg --print-architecture)"
deb="$scratch/out/spanscope_${version}_${arch}.deb"

echo "+ $cpack -G DEB -B $scratch/out --config $build/CPackConfig.cmake"
if ! "$cpack" -G DEB -B "$scratch/out" --config "$build/CPackConfig.cmake" >"$scratch/cpack.log" 2>&1; then
    cat "$scratch/cpack.log"
    echo "FAIL: cpack failed" >&2
    exit 1
fi
if [[ ! -f "$deb" ]]; then
    cat "$scratch/cpack.log"
    echo "FAIL: expected $(basename "$deb"); cpack wrote: $(find "$scratch/out" -maxdepth 1 -name "*.deb" -printf "%f ")" >&2
    exit 1
fi
echo "package: $(basename "$deb") ($(stat -c %s "$deb") bytes)"

echo "+ dpkg-deb -I"
dpkg-deb -I "$deb" || { echo "FAIL: dpkg-deb -I cannot read the package" >&2; exit 1; }

field() { dpkg-deb -f "$deb" "$1"; }
[[ "$(field Package)" == spanscope ]] || fail "Package is '$(field Package)', expected spanscope"
[[ "$(field Version)" == "$version" ]] || fail "Version is '$(field Version)', expected $version"
[[ "$(field Architecture)" == "$arch" ]] || fail "Architecture is '$(field Architecture)', expected $arch"
for f in Maintainer Section Description; do
    [[ -n "$(field "$f")" ]] || fail "$f field is empty"
done

# Depends: package names from every alternative, one per line.
depends="$(field Depends)"
dep_names="$(tr ',|' '\n' <<<"$depends" | sed -E 's/\(.*\)//; s/^ +//; s/ +$//' | grep -v '^$')"
has_dep() { grep -Eqx "$1" <<<"$dep_names"; }
[[ -n "$depends" ]] || fail "Depends is empty (dpkg-shlibdeps did not run?)"
has_dep 'libc6' || fail "Depends lacks libc6: '$depends'"
has_dep 'libsqlite3-0' || fail "Depends lacks libsqlite3-0: '$depends'"
has_dep 'libopenblas0(-[a-z]+)?' || fail "Depends lacks libopenblas0: '$depends'"
if [[ -n "$gui" ]]; then
    has_dep 'libqt6widgets6' || fail "Depends lacks libqt6widgets6 (the GUI is built): '$depends'"
    has_dep 'libqt6svg6' || fail "Depends lacks libqt6svg6 (the window icon is an SVG): '$depends'"
fi

echo "+ dpkg-deb -c"
dpkg-deb -c "$deb"
contents="$(dpkg-deb --fsys-tarfile "$deb" | tar -t)" || { echo "FAIL: cannot list the package" >&2; exit 1; }
expected=(./usr/bin/spanscope-cli
          ./usr/share/applications/org.spanscope.Spanscope.desktop
          ./usr/share/metainfo/org.spanscope.Spanscope.metainfo.xml
          ./usr/share/icons/hicolor/scalable/apps/org.spanscope.Spanscope.svg)
[[ -n "$gui" ]] && expected+=(./usr/bin/spanscope)
for p in "${expected[@]}"; do
    grep -Fqx -- "$p" <<<"$contents" || fail "package lacks $p"
done
# The lab (spanscope-lab, spanscope-report and their libraries) is never packaged.
lab="$(grep -E '(spanscope-lab|spanscope-report|spanscope_lab|spanscope_eval|spanscope_report)' <<<"$contents" || true)"
[[ -z "$lab" ]] || fail "package holds lab code: $lab"
outside="$(grep -Ev '^\./(usr(/.*)?)?$' <<<"$contents")"
[[ -z "$outside" ]] || fail "package has files outside /usr: $outside"

# Extract and run what was installed.
root="$scratch/root"
dpkg-deb -x "$deb" "$root" || { echo "FAIL: dpkg-deb -x failed" >&2; exit 1; }
for p in "${expected[@]}"; do
    [[ "$p" == ./usr/bin/* ]] || continue
    bin="$root/${p#./}"
    [[ -e "$bin" ]] || continue # reported above
    [[ -x "$bin" ]] || { fail "$p is not executable"; continue; }
    file -b "$bin" | grep -q '^ELF' || fail "$p is not an ELF file: $(file -b "$bin")"
    if command -v readelf >/dev/null && readelf -d "$bin" | grep -E 'RPATH|RUNPATH' | grep -Fq "$build"; then
        fail "$p still has the build tree in its RUNPATH"
    fi
    if command -v ldd >/dev/null && ldd "$bin" | grep -q 'not found'; then
        fail "$p has unresolved libraries: $(ldd "$bin" | grep 'not found' | tr -s ' \t' ' ')"
    fi
done

# The installed metainfo with its launchable .desktop file beside it.
if command -v appstreamcli >/dev/null; then
    echo "+ appstreamcli validate-tree --no-net --strict (extracted)"
    appstreamcli validate-tree --no-net --strict "$root" || fail "appstreamcli validate-tree failed on the extracted package"
else
    echo "note: appstreamcli not found (Debian package appstream); validate-tree not run"
fi

if [[ -x "$root/usr/bin/spanscope-cli" ]]; then
    echo "+ usr/bin/spanscope-cli --help (extracted)"
    help="$(timeout 60 "$root/usr/bin/spanscope-cli" --help 2>&1)"
    rc=$?
    echo "$help" | head -20
    ((rc == 0)) || fail "extracted spanscope-cli --help exited with $rc"
    [[ -n "$help" ]] || fail "extracted spanscope-cli --help printed nothing"
fi

if [[ -n "$gui" && -x "$root/usr/bin/spanscope" ]]; then
    echo "+ QT_QPA_PLATFORM=offscreen usr/bin/spanscope --version (extracted)"
    out="$(QT_QPA_PLATFORM=offscreen timeout 60 "$root/usr/bin/spanscope" --version 2>&1)"
    rc=$?
    echo "$out"
    ((rc == 0)) || fail "extracted spanscope --version exited with $rc"
    grep -Fq "$version" <<<"$out" || fail "extracted spanscope --version does not print $version"
fi

if ((failures)); then
    echo "deb_package: $failures check(s) failed" >&2
    exit 1
fi
echo "OK: $(basename "$deb")"
