#!/bin/bash
# The fifteenth session's final measurements, in one sequence on a quiet machine (nothing else running):
#  (the same sequence as ../2026-12-03-bf16-tiles/run.sh, at the session's final code: rotary without copies, the pair words on the CPU's conversion)
#  1. attention_bf16 on the pair kernels vs the float32 tiles (RELPOS_TILE_GEMM=avx512), 1 thread,
#     3 alternating runs of relpos_bench_ops --filter attention (attention_ops.txt);
#  2. relpos vs PyTorch 2.15 eager and compiled, fp32: three rounds of every PE on tiny and small,
#     three of long none/rope and one of long t5/alibi/shaw; bf16: three rounds of none/t5/rope on
#     tiny and small (train_<prec>_*.jsonl; python3 bench/summarise_rounds.py fp32|bf16 DIR).
set -u
D=$(cd "$(dirname "$0")" && pwd)
cd "$D/../../.."
for r in 1 2 3; do
  for m in pairs f32tiles; do
    if [ $m = f32tiles ]; then export RELPOS_TILE_GEMM=avx512; else unset RELPOS_TILE_GEMM; fi
    echo "round $r $m: $(build/relpos_bench_ops --threads 1 --filter attention | grep -v '"meta"' | python3 -c '
import sys, json
for l in sys.stdin:
    d = json.loads(l); print(d["op"], d["size"], round(d["ms"], 3), end=" | ")')"
  done
done > "$D/attention_ops.txt"
unset RELPOS_TILE_GEMM
for r in 1 2 3; do
  SIZES="tiny small" POS="none t5 alibi rope shaw" PEERS="torch2 torch2c" bench/run_train_bench.sh 2 > "$D/train_fp32_ts_round$r.md" 2>&1
  cp "$(ls -t bench/out/train_T2_*.jsonl | head -1)" "$D/train_fp32_ts_round$r.jsonl"
  POS_LONG="none rope"; [ $r = 1 ] && POS_LONG="none t5 alibi rope shaw"
  SIZES="long" POS="$POS_LONG" PEERS="torch2 torch2c" bench/run_train_bench.sh 2 > "$D/train_fp32_long_round$r.md" 2>&1
  cp "$(ls -t bench/out/train_T2_*.jsonl | head -1)" "$D/train_fp32_long_round$r.jsonl"
  PRECISION=bf16 SIZES="tiny small" POS="none t5 rope" PEERS="torch2 torch2c" bench/run_train_bench.sh 2 > "$D/train_bf16_round$r.md" 2>&1
  cp "$(ls -t bench/out/train_T2_*.jsonl | head -1)" "$D/train_bf16_round$r.jsonl"
done
echo done > "$D/run.done"
