#!/usr/bin/env bash
# Build the libFuzzer targets in the sanitizer build (build-asan/: clang, ASan + UBSan, the one
# scripts/test.sh uses with RELPOS_SANITIZE=1) and run each one on its seed corpus for SECONDS
# seconds (default 60), or for RUNS executions when RUNS is set.
#   scripts/fuzz.sh [SECONDS] [target ...]     e.g. scripts/fuzz.sh 10 fuzz_config
# New inputs go to build-asan/corpus/<target>/ (the committed seeds in fuzz/corpus/ are read
# only); crashes are written to build-asan/crashes/<target>/ and make the script fail.
# Each target's last libFuzzer line (execution count) is printed at the end.
# Each target runs in its own working directory, build-asan/work/<target>/, whose
# data/tinyshakespeare.txt (the path the seeds name) is the first 16 KiB of the real file: the
# spec and config readers are what is fuzzed, and reading 1.1 MB per input under the
# sanitizers would make most of the time go to the data check (25 instead of 200+ runs/s).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then  # every fuzz/fuzz_*.cpp is a target (fuzz/CMakeLists.txt)
  for f in fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
dir=$(realpath -m "${RELPOS_FUZZ_BUILD_DIR:-build-asan}")
src=$PWD
RELPOS_SANITIZE=1 RELPOS_BUILD_DIR="$dir" RELPOS_BUILD_TARGETS="${targets[*]}" RELPOS_JOBS="${RELPOS_FUZZ_JOBS:-$(nproc)}" \
  scripts/build.sh
status=0
summary=()
for t in "${targets[@]}"; do
  mkdir -p "$dir/corpus/$t" "$dir/crashes/$t" "$dir/work/$t/data"
  head -c 16384 data/tinyshakespeare.txt > "$dir/work/$t/data/tinyshakespeare.txt"
  limit=(-max_total_time="$secs")
  [[ -n "${RUNS:-}" ]] && limit=(-runs="$RUNS")
  tmo=$((secs + 300))
  [[ -n "${RUNS:-}" ]] && tmo=86400
  log="$dir/$t.log"
  # rss_limit: a reader that allocates what a header claims is a finding, not an OOM kill.
  # timeout: libFuzzer has been seen to hang in its out-of-memory handler; a hang is a failure.
  # hard_rss_limit_mb: AddressSanitizer's own limit, just above libFuzzer's, reports and writes the
  # input even where libFuzzer's handler does not get that far.
  if ! (cd "$dir/work/$t" && ASAN_OPTIONS=${ASAN_OPTIONS:-hard_rss_limit_mb=2560} OMP_NUM_THREADS=1 timeout --signal=KILL "$tmo" "$dir/fuzz/$t" "${limit[@]}" -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$dir/crashes/$t/" "$dir/corpus/$t" "$src/fuzz/corpus/$t") > "$log" 2>&1; then
    status=1
    echo "== $t: FAILED (see $log and $dir/crashes/$t/)"
    tail -30 "$log"
  fi
  summary+=("$t: $(grep -E '^(#[0-9]+|Done)' "$log" | tail -1)")
done
printf '%s\n' "${summary[@]}"
exit $status
