#!/usr/bin/env bash
# bench/data_parallel_bench.sh — data-parallel throughput on one machine: the same global
# batch G trained by
#   1 process x 1 thread   (batch G)          the baseline
#   1 process x 2 threads  (batch G)          OpenMP inside the ops
#   2 ranks   x 1 thread   (batch G/2 each)   mpirun -np 2 (trainers/dist/data_parallel.h)
# Reports tokens/s (median over the logged windows after the first), rank 0's comm_fraction,
# and the last training loss (the runs see the same data: losses agree to float rounding).
#   bench/data_parallel_bench.sh [CONFIG]     default configs/quickstart.yaml with the
#                                             benchmark's "small" model (MODEL below)
#   env: G (global batch, 8), SEQ (seq_len, 256), STEPS (30), LOG (5),
#        MODEL (--set overrides; default d_model 256, 4 layers, 8 heads, d_ff 1024; "" = the config's)
# Needs a quiet machine: with 2 cores, anything else running distorts every row.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RELPOS="${RELPOS:-$ROOT/build/relpos}"
CONFIG=${1:-configs/quickstart.yaml}
G=${G:-8}
SEQ=${SEQ:-256}
STEPS=${STEPS:-30}
LOG=${LOG:-5}
MODEL=${MODEL-"--set model.d_model=256 --set model.n_layers=4 --set model.n_heads=8 --set model.d_ff=1024 --set model.max_len=512"}
command -v mpirun > /dev/null || { echo "mpirun not found (scripts/install-deps.sh installs openmpi-bin)" >&2; exit 2; }
work=$(mktemp -d /tmp/relpos_dpbench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$ROOT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1

sets() {  # batch out
  echo --set data.batch_size="$1" --set data.seq_len="$SEQ" --set train.steps="$STEPS" --set optim.warmup=0 \
    --set train.log_every="$LOG" --set train.eval_every="$STEPS" --set train.eval_batches=1 \
    --set train.checkpoint_every=0 --set output.dir="$2" --overwrite $MODEL
}
summary() {  # label dir
  python3 - "$1" "$2/metrics.jsonl" <<'PY'
import json, statistics, sys
label, path = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(path) if '"tokens_per_s"' in l]
tps = [r["tokens_per_s"] for r in rows[1:]] or [rows[0]["tokens_per_s"]]
comm = [r["comm_fraction"] for r in rows[1:] if "comm_fraction" in r]
print(f"| {label} | {statistics.median(tps):.0f} | "
      f"{(f'{100 * statistics.median(comm):.1f}%' if comm else '-')} | {rows[-1]['loss']:.6f} |")
PY
}

echo "$("$RELPOS" --version | head -1); $CONFIG ${MODEL//--set /}; global batch $G x seq $SEQ, $STEPS steps; $(nproc) cores; $(date -u +%Y-%m-%d)"
echo
echo "| setup | tokens/s | comm_fraction (rank 0) | last loss |"
echo "|---|---:|---:|---:|"
# shellcheck disable=SC2046
OMP_NUM_THREADS=1 "$RELPOS" --threads 1 train "$CONFIG" $(sets "$G" "$work/t1") > "$work/t1.log" 2>&1
summary "1 process x 1 thread, batch $G" "$work/t1"
# shellcheck disable=SC2046
OMP_NUM_THREADS=2 "$RELPOS" --threads 2 train "$CONFIG" $(sets "$G" "$work/t2") > "$work/t2.log" 2>&1
summary "1 process x 2 threads, batch $G" "$work/t2"
# shellcheck disable=SC2046
OMP_NUM_THREADS=1 mpirun -np 2 "$RELPOS" --threads 1 train "$CONFIG" $(sets $((G / 2)) "$work/r2") > "$work/r2.log" 2>&1 ||
  { tail -20 "$work/r2.log"; exit 1; }
summary "2 ranks x 1 thread, batch $((G / 2)) each" "$work/r2"
