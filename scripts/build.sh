#!/usr/bin/env bash
# Configure and build relpos (Release) into ./build (or $RELPOS_BUILD_DIR).
#   RELPOS_SANITIZE=1  AddressSanitizer + UndefinedBehaviorSanitizer build (CUDA off)
#   RELPOS_WERROR=ON   warnings are errors (CI)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
dir=${RELPOS_BUILD_DIR:-build}
args=(-DCMAKE_BUILD_TYPE=Release -DRELPOS_WERROR="${RELPOS_WERROR:-OFF}")
if [[ "${RELPOS_SANITIZE:-0}" == 1 ]]; then
  dir=${RELPOS_BUILD_DIR:-build-asan}
  args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DRELPOS_SANITIZE=ON -DRELPOS_CUDA=OFF -DRELPOS_WERROR="${RELPOS_WERROR:-OFF}")
fi
mkdir -p "$dir"
cmake -S . -B "$dir" "${args[@]}" > "$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
cmake --build "$dir" -j "$(nproc)"
