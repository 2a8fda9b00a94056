#!/bin/bash
# The twelfth session's full comparison on this VM, in one quiet sequence (nothing else running):
# GEMM peaks (relpos and PyTorch 2.15), issue 20's fp32 table, issue 21's bf16 table, relpos bf16
# vs fp32. Outputs next to this script.
set -u
D=$(cd "$(dirname "$0")" && pwd)
cd "$D/../../.."
export PATH=/usr/bin:$PATH
# (ran first with Debian's torch 1.13, which has no SDPA: torch_ops.py failed; rounds.sh redid it)
PYTHON=bench/.venv-torch2/bin/python bench/run_ops_bench.sh 2 > "$D/ops_T2.md" 2>&1
SIZES="tiny small long" POS="none t5 alibi rope shaw" PEERS="torch2 torch2c" bench/run_train_bench.sh 2 > "$D/train_fp32.md" 2>&1
cp "$(ls -t bench/out/train_T2_*.jsonl | head -1)" "$D/train_fp32.jsonl"
PRECISION=bf16 SIZES="tiny small long" POS="none t5 rope" PEERS="torch2 torch2c" bench/run_train_bench.sh 2 > "$D/train_bf16.md" 2>&1
cp "$(ls -t bench/out/train_T2_*.jsonl | head -1)" "$D/train_bf16.jsonl"
bash bench/results/2026-12-02-autocast/bf16_vs_fp32.sh > "$D/bf16_vs_fp32.txt" 2>&1
echo done > "$D/full_run.done"
