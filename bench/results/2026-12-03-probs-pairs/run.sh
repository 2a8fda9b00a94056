#!/bin/bash
# The sixteenth session's measurements of P and dS as bf16 values on the pair kernels (commit f9b77b3),
# in one sequence on a quiet machine (nothing else running). Already recorded beside this script:
#   attention_ops.txt  relpos_bench_ops --threads 1 --filter attention_bf16, 91fe031 (old) vs f9b77b3 (new),
#                      both built -DRELPOS_CUDA=OFF in worktrees, 6 alternating runs;
#   ab_bf16_T{1,2}.md  PRECISION=bf16 POS="none t5 rope" REPEATS=5 bench/compare_commits.sh OLD NEW {1,2}.
# This script:
#  1. relpos bf16 vs PyTorch 2.15 eager and compiled under bf16 autocast: three rounds of none/t5/rope
#     on tiny, small and long (T = 2048) (train_bf16_round*.{md,jsonl};
#     python3 bench/summarise_rounds.py bf16 DIR);
#  2. relpos bf16 vs relpos fp32, same binary, 5 alternating runs per cell (bf16_vs_fp32.md).
set -u
D=$(cd "$(dirname "$0")" && pwd)
cd "$D/../../.."
for r in 1 2 3; do
  PRECISION=bf16 SIZES="tiny small long" POS="none t5 rope" PEERS="torch2 torch2c" bench/run_train_bench.sh 2 > "$D/train_bf16_round$r.md" 2>&1
  cp "$(ls -t bench/out/train_T2_*.jsonl | head -1)" "$D/train_bf16_round$r.jsonl"
done
{
  echo "relpos bf16 vs fp32, build/relpos_bench_train, 2 threads, 5 alternating runs each (median of each run's median ms/step)"
  echo
  echo "| size | PE | fp32 ms/step | bf16 ms/step | fp32/bf16 |"
  echo "|---|---|---:|---:|---:|"
  for size in tiny small; do
    if [ $size = tiny ]; then a="--d-model 128 --layers 2 --heads 4 --seq 128 --batch 16 --warmup 2 --steps 10"
    else a="--d-model 256 --layers 4 --heads 8 --seq 256 --batch 8 --warmup 1 --steps 4"; fi
    for pos in none t5 rope; do
      f=(); b=()
      for i in 1 2 3 4 5; do
        for p in fp32 bf16; do
          ms=$(build/relpos_bench_train $a --threads 2 --pos $pos --precision $p | python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["ms_per_step_median"])')
          if [ $p = fp32 ]; then f+=("$ms"); else b+=("$ms"); fi
        done
      done
      python3 - "$size" "$pos" "${f[*]}" "${b[*]}" <<'PY'
import statistics, sys
size, pos, f, b = sys.argv[1], sys.argv[2], [float(x) for x in sys.argv[3].split()], [float(x) for x in sys.argv[4].split()]
mf, mb = statistics.median(f), statistics.median(b)
print(f"| {size} | {pos} | {mf:.1f} ({min(f):.1f}-{max(f):.1f}) | {mb:.1f} ({min(b):.1f}-{max(b):.1f}) | {mf / mb:.2f} |")
PY
    done
  done
} > "$D/bf16_vs_fp32.md"
echo done > "$D/run.done"
