#!/usr/bin/env bash
# bench/compare_commits.sh OLD_BENCH NEW_BENCH [THREADS]
# The training-step benchmark (relpos_bench_train, see bench/bench_train.cpp) of two builds side
# by side: for each size and position encoding, the two binaries run alternately (old, new, old,
# new, ... REPEATS times each, so drift in the machine hits both), and the table gives the median
# over the repeats of each run's median ms/step and the ratio new/old (lower is better).
# Build the old one from a worktree, e.g.
#   git worktree add /tmp/old <commit> && cmake -S /tmp/old -B /tmp/old/build -DRELPOS_BUILD_TESTS=OFF \
#     && cmake --build /tmp/old/build --target relpos_bench_train -j2
#   bench/compare_commits.sh /tmp/old/build/relpos_bench_train build/relpos_bench_train 2
# Run it on a quiet machine (nothing else running: 2 OpenMP threads collapse under load).
# SIZES (tiny, small, long; default "tiny small"), POS (default "none t5 rope shaw"), REPEATS
# (default 5), PRECISION (fp32 or bf16, default fp32; OLD_PRECISION / NEW_PRECISION set one side,
# e.g. one binary's bf16 step against its fp32 one), OLD_NAME / NEW_NAME (the column titles,
# default old / new). The range columns show the fastest and slowest run of each binary (a wide
# one: a busy machine).
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,17p' "$0"; exit 2; }
OLD=$1 NEW=$2 THREADS=${3:-2}
SIZES=${SIZES:-"tiny small"} POS=${POS:-"none t5 rope shaw"} REPEATS=${REPEATS:-5} PRECISION=${PRECISION:-fp32}
OLD_PRECISION=${OLD_PRECISION:-$PRECISION} NEW_PRECISION=${NEW_PRECISION:-$PRECISION}
O=${OLD_NAME:-old} N=${NEW_NAME:-new}
for b in "$OLD" "$NEW"; do [[ -x "$b" ]] || { echo "not an executable: $b" >&2; exit 2; }; done

size_args() {
  case "$1" in
    tiny) echo "--d-model 128 --layers 2 --heads 4 --seq 128 --batch 16 --warmup 2 --steps 10" ;;
    small) echo "--d-model 256 --layers 4 --heads 8 --seq 256 --batch 8 --warmup 1 --steps 4" ;;
    long) echo "--d-model 128 --layers 2 --heads 4 --seq 2048 --batch 1 --warmup 2 --steps 8" ;;
    *) echo "unknown size $1" >&2; exit 2 ;;
  esac
}

median_ms() {  # the ms_per_step_median of one run's JSON line
  python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["ms_per_step_median"])'
}

echo "threads $THREADS, precision $O $OLD_PRECISION / $N $NEW_PRECISION, $REPEATS alternating runs per binary; ms/step = median over runs of each run's median"
echo
echo "| size | PE | $O ms/step | $O range | $N ms/step | $N range | $N/$O |"
echo "|---|---|---|---|---|---|---|"
for size in $SIZES; do
  for pos in $POS; do
    args="$(size_args "$size") --threads $THREADS --pos $pos"
    olds=() news=()
    for ((r = 0; r < REPEATS; r++)); do
      olds+=("$(OMP_NUM_THREADS=$THREADS "$OLD" $args --precision "$OLD_PRECISION" | median_ms)")
      news+=("$(OMP_NUM_THREADS=$THREADS "$NEW" $args --precision "$NEW_PRECISION" | median_ms)")
    done
    python3 - "$size" "$pos" "${olds[*]}" "${news[*]}" <<'EOF'
import statistics, sys
size, pos, olds, news = sys.argv[1], sys.argv[2], list(map(float, sys.argv[3].split())), list(map(float, sys.argv[4].split()))
o, n = statistics.median(olds), statistics.median(news)
print(f"| {size} | {pos} | {o:.1f} | {min(olds):.1f}-{max(olds):.1f} | {n:.1f} | {min(news):.1f}-{max(news):.1f} | {n / o:.3f} |")
EOF
  done
done
