#!/usr/bin/env bash
# A short fuzzing pass for CI: every libFuzzer target for ${FUZZ_SECONDS:-15} seconds on its
# seed corpus (scripts/fuzz.sh does the build); fails on any crash, leak or sanitizer report.
set -euo pipefail
cd "$(dirname "$0")/.."
exec scripts/fuzz.sh "${FUZZ_SECONDS:-15}"
