#!/usr/bin/env bash
# Install relpos into a temporary prefix, then configure, build and run examples/ against the
# installed package only (find_package(relpos), no access to the source tree's headers).
#   scripts/test-install.sh            uses ./build (configured by scripts/build.sh), or $RELPOS_BUILD_DIR
# Exit 0 when the example builds, runs, and its loss decreased.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
build=${RELPOS_BUILD_DIR:-build}
[[ -f "$build/CMakeCache.txt" ]] || scripts/build.sh
cmake --build "$build" -j "$(nproc)" --target relpos relpos_trainers >/dev/null
tmp=$(mktemp -d /tmp/relpos-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
echo "installed into $prefix: $(find "$prefix" -type f | wc -l) files"
test -f "$prefix/include/relpos/nn/models.h"
test -f "$prefix/lib/cmake/relpos/relposConfig.cmake" || test -f "$prefix/lib64/cmake/relpos/relposConfig.cmake"
"$prefix/bin/relpos" --version
# Build the example from a copy, so nothing in the source tree is on its include path.
cp -r "$src/examples" "$tmp/examples"
cmake -S "$tmp/examples" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >"$tmp/configure.log" 2>&1 ||
  { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/build" -j "$(nproc)" -- VERBOSE=1 >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
# relpos's own flags must not leak into the consumer's compile line.
if grep -E -- "-march=native|-Werror|-Wpedantic|$src" "$tmp/build.log" | grep -q train_tiny.cpp; then
  echo "FAIL: relpos build flags or source paths leaked into the consumer's compile line:"
  grep train_tiny.cpp "$tmp/build.log"
  exit 1
fi
(cd "$tmp" && OMP_NUM_THREADS=1 "$tmp/build/train_tiny" "$tmp/run")
test -f "$tmp/run/checkpoints/step_00000030/model.safetensors"
# The same program through pkg-config (no CMake on the consumer side).
pc=$(find "$prefix" -name relpos.pc | head -1)
if command -v pkg-config >/dev/null && [[ -n "$pc" ]]; then
  export PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  # shellcheck disable=SC2046
  c++ -O1 -o "$tmp/train_tiny_pc" "$tmp/examples/train_tiny.cpp" $(pkg-config --cflags --libs relpos)
  (cd "$tmp" && OMP_NUM_THREADS=1 "$tmp/train_tiny_pc" "$tmp/run_pc" >/dev/null)
  echo "pkg-config build: ok"
else
  echo "pkg-config build: skipped (no pkg-config or relpos.pc)"
fi
echo "test-install: ok (example built against $prefix and ran)"
