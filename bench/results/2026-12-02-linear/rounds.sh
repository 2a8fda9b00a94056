#!/bin/bash
# Two more rounds of the cells issues 20/21 set targets on (tiny/small; fp32 none/rope, bf16
# none/t5/rope), then the GEMM/attention op peaks with PyTorch 2.15's python. This VM's
# run-to-run spread (one cell: 40-77 ms) needs medians over rounds.
set -u
D=$(cd "$(dirname "$0")" && pwd)
cd "$D/../../.."
for r in 2 3; do
  SIZES="tiny small" POS="none rope" PEERS="torch2 torch2c" bench/run_train_bench.sh 2 > "$D/train_fp32_round$r.md" 2>&1
  cp "$(ls -t bench/out/train_T2_*.jsonl | head -1)" "$D/train_fp32_round$r.jsonl"
  PRECISION=bf16 SIZES="tiny small" POS="none t5 rope" PEERS="torch2 torch2c" bench/run_train_bench.sh 2 > "$D/train_bf16_round$r.md" 2>&1
  cp "$(ls -t bench/out/train_T2_*.jsonl | head -1)" "$D/train_bf16_round$r.jsonl"
done
PYTHON=bench/.venv-torch2/bin/python bench/run_ops_bench.sh 2 > "$D/ops_T2.md" 2>&1
echo done > "$D/rounds.done"
