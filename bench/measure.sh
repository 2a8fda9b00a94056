#!/bin/bash
# bench/measure.sh OUT_DIR — the standard measurement sequence of bench/RESULTS.md, run on a
# quiet machine (nothing else running; ~15 min on 2 cores), written to OUT_DIR:
#   1. three rounds of relpos vs PyTorch 2.15 eager and compiled (bench/run_train_bench.sh with
#      PEERS="torch2 torch2c"), 2 threads, fp32 and bf16 (autocast), tiny/small/long with none,
#      t5 and rope (train_<prec>_round<r>.{md,jsonl});
#   2. relpos bf16 against relpos float32, same binary, five alternating runs per cell
#      (bf16_vs_fp32.md; bench/compare_commits.sh, ratio bf16/fp32);
#   3. with OLD_BIN set (another build's relpos_bench_train, e.g. of the commit before a change):
#      OLD_BIN against build/relpos_bench_train, three alternating runs per cell, PE none, fp32
#      and bf16 (ab.md; bench/compare_commits.sh, ratio new/old);
#   4. the ops: relpos_bench_ops (GEMMs at the models' shapes and square ones; attention) and
#      torch_ops.py's attention and GEMMs (ops.jsonl, ops_torch.jsonl): the roofline's peaks;
#   5. the roofline line from 1 and 4 (bench/roofline.py: roofline.md).
# Summarise 1: python3 bench/summarise_rounds.py fp32|bf16 OUT_DIR. Two builds alone, in more
# runs: bench/compare_commits.sh.
set -u
[[ $# -eq 1 ]] || { sed -n '2,17p' "$0"; exit 2; }
mkdir -p "$1"
D=$(cd "$1" && pwd)
cd "$(dirname "$0")/.." || exit 2
export OMP_NUM_THREADS=2
for r in 1 2 3; do
  for prec in fp32 bf16; do
    PRECISION=$prec SIZES="tiny small long" POS="none t5 rope" PEERS="torch2 torch2c" bench/run_train_bench.sh 2 > "$D/train_${prec}_round$r.md" 2>&1
    cp "$(ls -t bench/out/train_T2_*.jsonl | head -1)" "$D/train_${prec}_round$r.jsonl"
  done
done
BIN=build/relpos_bench_train
SIZES="tiny small long" POS="none t5 rope" REPEATS=5 OLD_NAME=fp32 NEW_NAME=bf16 \
  OLD_PRECISION=fp32 NEW_PRECISION=bf16 bench/compare_commits.sh "$BIN" "$BIN" 2 > "$D/bf16_vs_fp32.md"
if [ -n "${OLD_BIN:-}" ]; then
  for prec in fp32 bf16; do
    echo "### $prec"
    SIZES="tiny small long" POS=none REPEATS=3 OLD_NAME=before NEW_NAME=after PRECISION=$prec \
      bench/compare_commits.sh "$OLD_BIN" "$BIN" 2
    echo
  done > "$D/ab.md"
fi
build/relpos_bench_ops --threads 2 > "$D/ops.jsonl" 2>&1
{
  bench/.venv-torch2/bin/python bench/torch_ops.py --threads 2 --filter attention
  bench/.venv-torch2/bin/python bench/torch_ops.py --threads 2 --filter matmul | grep -v '"meta"'
} > "$D/ops_torch.jsonl" 2>&1
python3 bench/roofline.py "$D" > "$D/roofline.md" 2>&1
echo "done" > "$D/run.done"
