#!/bin/bash
# Prepare, on the build machine, what the GPU check (scripts/gpu-check.sh) needs on a GPU
# machine that has the CUDA driver and toolkit but none of Spanscope's Debian packages: the
# CUDA-enabled programs and the shared libraries they load besides glibc and CUDA's, in .gpu/
# (ignored by git), packed as .gpu/bundle.tar.xz. (The GPU machine's glibc must be at least the
# build machine's, Debian 12's 2.36.) The model travels in pieces of at most PIECE_MB (default 45) MiB as
# .gpu/model.part-*, so that each transfer to a machine that caps what travels stays small;
# gpu-check.sh joins them and checks the SHA-256 recorded here.
# Usage (repository root, after `bash scripts/setup.sh test`):
#   bash scripts/gpu-bundle.sh [BUILD_DIR]      # default build/
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MODEL=${MODEL:-$HOME/.local/share/spanscope/models/gemma-3-270m-q4_k_m.gguf}
grep -q '^/.gpu/$' .git/info/exclude 2>/dev/null || echo /.gpu/ >> .git/info/exclude
if ! grep -q '^SPANSCOPE_CUDA:BOOL=ON' "$BUILD/CMakeCache.txt"; then
    echo "gpu-bundle: $BUILD was configured without the CUDA backend (SPANSCOPE_CUDA=OFF)" >&2
    exit 1
fi
ninja -C "$BUILD" spanscope-cli test_cuda_parity test_cuda_sekv test_backend
rm -rf .gpu && mkdir -p .gpu/bin .gpu/lib
cp "$BUILD"/app/cli/spanscope-cli "$BUILD"/tests/test_cuda_parity "$BUILD"/tests/test_cuda_sekv \
    "$BUILD"/tests/test_backend .gpu/bin/
# Every shared library the programs load except glibc's own, the dynamic loader and CUDA's
# (the GPU machine has its driver and toolkit).
for b in .gpu/bin/*; do ldd "$b"; done | awk '/=> \// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcuda|libcublas[^/]*|libcudart)\.so' |
    while read -r lib; do cp -L "$lib" .gpu/lib/; done
if [ -f "$MODEL" ]; then
    split -b "${PIECE_MB:-45}M" -d "$MODEL" .gpu/model.part-
    sha256sum "$MODEL" | awk '{print $1}' > .gpu/model.sha256
fi
# One archive of both (about 21 MiB instead of 100): what travels to the GPU machine.
tar -C .gpu -cf - bin lib | xz -T0 -6 > .gpu/bundle.tar.xz
du -sh .gpu/bin .gpu/lib .gpu/bundle.tar.xz
ls .gpu/model.part-* 2>/dev/null | sed 's/^/model piece: /' || echo "no model at $MODEL: none bundled"
