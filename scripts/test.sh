#!/usr/bin/env bash
# The test command: install dependencies, build, run the whole suite through ctest.
# RELPOS_SANITIZE=1 runs it on the AddressSanitizer + UBSan build instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
dir=${RELPOS_BUILD_DIR:-build}
[[ "${RELPOS_SANITIZE:-0}" == 1 ]] && dir=${RELPOS_BUILD_DIR:-build-asan}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$dir" && ctest --output-on-failure -j "$(nproc)"
