#!/usr/bin/env bash
# bench/profile_train.sh [POS...] — perf profile of relpos training steps (tiny size:
# d_model 128, 2 layers, 4 heads, seq 128, batch 16), summarised by bench/perf_summary.py.
#   THREADS (default 1: clean attribution, no OpenMP spinning), STEPS (default 8, +1 warmup),
#   FREQ (default 499 Hz). perf data and summaries go to bench/out/profile_<pos>.{data,txt,md};
#   the GEMM table (RELPOS_GEMM_PROFILE=1, kernels/cpu/gemm.h: perf cannot unwind oneDNN's JIT
#   code) to bench/out/profile_<pos>.gemm.md, followed by the op table (RELPOS_OP_PROFILE=1,
#   kernels/dispatch.cpp: every raw op, and the time between ops).
# Needs `perf` and kernel.perf_event_paranoid <= 2 (user-space sampling of own processes).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
THREADS=${THREADS:-1}
STEPS=${STEPS:-8}
FREQ=${FREQ:-499}
OUT="$ROOT/bench/out"
mkdir -p "$OUT"
[[ -f "$BUILD/CMakeCache.txt" ]] || cmake -S "$ROOT" -B "$BUILD" >/dev/null
cmake --build "$BUILD" -j2 --target relpos_bench_train >/dev/null
export OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS"
POSLIST=("$@")
[[ ${#POSLIST[@]} -gt 0 ]] || POSLIST=(t5 rope)
for pos in "${POSLIST[@]}"; do
  RELPOS_GEMM_PROFILE=1 RELPOS_OP_PROFILE=1 perf record -q -F "$FREQ" --call-graph dwarf,32768 -o "$OUT/profile_$pos.data" \
    "$BUILD/relpos_bench_train" --d-model 128 --layers 2 --heads 4 --seq 128 --batch 16 \
    --pos "$pos" --threads "$THREADS" --warmup 1 --steps "$STEPS" >"$OUT/profile_$pos.json" \
    2>"$OUT/profile_$pos.gemm.md"
  perf script -i "$OUT/profile_$pos.data" -F comm,tid,time,ip,sym,dso --no-inline 2>/dev/null >"$OUT/profile_$pos.txt"
  /usr/bin/python3 "$ROOT/bench/perf_summary.py" "$OUT/profile_$pos.txt" >"$OUT/profile_$pos.md"
  echo "## tiny $pos, $THREADS thread(s): $(cut -c1-200 "$OUT/profile_$pos.json")"
  cat "$OUT/profile_$pos.md"
  echo "GEMMs and ops of the warmup and the $STEPS timed steps:"
  cat "$OUT/profile_$pos.gemm.md"
done
