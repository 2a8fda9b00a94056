#!/usr/bin/env bash
# Configure and build relpos (Release) into ./build (or $RELPOS_BUILD_DIR).
#   RELPOS_SANITIZE=1  the sanitizer build in ./build-asan: clang with AddressSanitizer +
#                      UndefinedBehaviorSanitizer, the libFuzzer instrumentation and the fuzz
#                      targets (RELPOS_FUZZ), CUDA off; one build serves the test suite
#                      (scripts/test.sh) and the fuzzers (scripts/fuzz.sh)
#   RELPOS_WERROR=ON   warnings are errors (CI)
#   RELPOS_BUILD_TARGETS="a b"  build only these targets (default: all)
#   ccache is used where installed (scripts/install-deps.sh installs it)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${RELPOS_BUILD_DIR:-build}
args=(-DCMAKE_BUILD_TYPE=Release -DRELPOS_WERROR="${RELPOS_WERROR:-OFF}")
if [[ "${RELPOS_SANITIZE:-0}" == 1 ]]; then
  scripts/install-deps.sh --fuzz
  dir=${RELPOS_BUILD_DIR:-build-asan}
  cxx=${CXX_FUZZ:-$(command -v clang++-14 || command -v clang++)}
  # Line tables only: symbolised reports with file:line, a fraction of full debug info's
  # compile and link time.
  args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG"
        -DCMAKE_CXX_COMPILER="$cxx" -DRELPOS_SANITIZE=ON -DRELPOS_FUZZ=ON -DRELPOS_CUDA=OFF
        -DRELPOS_WERROR="${RELPOS_WERROR:-OFF}")
else
  scripts/install-deps.sh
fi
# ccache, where installed: compiler output cached by content, with paths relative to this tree
# (CCACHE_BASEDIR), so a rebuild or a fresh clone elsewhere reuses the objects of earlier builds.
if command -v ccache > /dev/null; then
  args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=$PWD
fi
mkdir -p "$dir"
cmake -S . -B "$dir" "${args[@]}" > "$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
targets=()
for t in ${RELPOS_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$dir" -j "${RELPOS_JOBS:-$(nproc)}" "${targets[@]}"
