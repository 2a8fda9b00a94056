#!/bin/bash
# The seventeenth session's measurements on a 2-vCPU Intel Xeon with AMX-BF16, AVX512-BF16 and
# AVX512-FP16 (the machine type issues 20 and 21 were written on), in one sequence on a quiet
# machine: three rounds of relpos vs PyTorch 2.15 eager and compiled at 2 threads, fp32 and bf16
# (autocast), tiny/small/long with none, t5 and rope, relpos first in odd rounds and last in even
# ones. Summarise: python3 bench/summarise_rounds.py fp32|bf16 DIR.
set -u
D=$(cd "$(dirname "$0")" && pwd)
cd "$D/../../.."
for r in 1 2 3; do
  for prec in fp32 bf16; do
    PRECISION=$prec SIZES="tiny small long" POS="none t5 rope" PEERS="torch2 torch2c" bench/run_train_bench.sh 2 > "$D/train_${prec}_round$r.md" 2>&1
    cp "$(ls -t bench/out/train_T2_*.jsonl | head -1)" "$D/train_${prec}_round$r.jsonl"
  done
done
echo done > "$D/run.done"
