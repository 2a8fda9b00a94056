#!/bin/bash
# bench/session_measurements.sh OUT_DIR — a session's closing measurements, in one sequence on a
# quiet machine (nothing else running; ~15 min on 2 cores), written to OUT_DIR:
#   1. three rounds of relpos vs PyTorch 2.15 eager and compiled (bench/run_train_bench.sh with
#      PEERS="torch2 torch2c"), 2 threads, fp32 and bf16 (autocast), tiny/small/long with none,
#      t5 and rope (train_<prec>_round<r>.{md,jsonl});
#   2. relpos bf16 against relpos float32, same binary, five alternating runs per cell
#      (bf16_vs_fp32.md);
#   3. with OLD_BIN set (a relpos_bench_train built at the session's start): OLD_BIN against
#      build/relpos_bench_train, three alternating runs per cell, PE none (ab.md);
#   4. the ops: relpos_bench_ops (GEMMs at the models' shapes and square ones; attention) and
#      torch_ops.py's attention and GEMMs (ops.jsonl, ops_torch.jsonl): the roofline's peaks;
#   5. the roofline line from 1 and 4 (bench/roofline.py: roofline.md).
# Summarise 1: python3 bench/summarise_rounds.py fp32|bf16 OUT_DIR. Two builds alone, in more
# runs: bench/compare_commits.sh.
set -u
[[ $# -eq 1 ]] || { sed -n '2,16p' "$0"; exit 2; }
mkdir -p "$1"
D=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=2
for r in 1 2 3; do
  for prec in fp32 bf16; do
    PRECISION=$prec SIZES="tiny small long" POS="none t5 rope" PEERS="torch2 torch2c" bench/run_train_bench.sh 2 > "$D/train_${prec}_round$r.md" 2>&1
    cp "$(ls -t bench/out/train_T2_*.jsonl | head -1)" "$D/train_${prec}_round$r.jsonl"
  done
done
args() {
  case "$1" in
    tiny) echo "--d-model 128 --layers 2 --heads 4 --seq 128 --batch 16 --warmup 2 --steps 10" ;;
    small) echo "--d-model 256 --layers 4 --heads 8 --seq 256 --batch 8 --warmup 1 --steps 4" ;;
    long) echo "--d-model 128 --layers 2 --heads 4 --seq 2048 --batch 1 --warmup 2 --steps 8" ;;
  esac
}
ms_of() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["ms_per_step_median"])'; }
table() {  # table TITLE_A TITLE_B CMD_A CMD_B SIZES POSLIST RUNS
  echo "| size | PE | $1 ms/step (runs) | $2 ms/step (runs) | $1/$2 (medians) |"
  echo "|---|---|---|---|---:|"
  for size in $5; do
    for pos in $6; do
      f=(); b=()
      for i in $(seq "$7"); do
        f+=("$($3 $(args $size) --pos $pos --threads 2 2>/dev/null | ms_of)")
        b+=("$($4 $(args $size) --pos $pos --threads 2 2>/dev/null | ms_of)")
      done
      python3 - "$size" "$pos" "${f[*]}" "${b[*]}" <<'PY'
import statistics, sys
size, pos, f, b = sys.argv[1], sys.argv[2], [float(x) for x in sys.argv[3].split()], [float(x) for x in sys.argv[4].split()]
mf, mb = statistics.median(f), statistics.median(b)
print(f"| {size} | {pos} | {mf:.1f} ({min(f):.1f}-{max(f):.1f}) | {mb:.1f} ({min(b):.1f}-{max(b):.1f}) | {mf / mb:.2f} |")
PY
    done
  done
}
table fp32 bf16 "build/relpos_bench_train --precision fp32" "build/relpos_bench_train --precision bf16" \
  "tiny small long" "none t5 rope" 5 > "$D/bf16_vs_fp32.md"
if [ -n "${OLD_BIN:-}" ]; then
  {
    echo "### fp32"
    table before after "$OLD_BIN --precision fp32" "build/relpos_bench_train --precision fp32" "tiny small long" none 3
    echo
    echo "### bf16"
    table before after "$OLD_BIN --precision bf16" "build/relpos_bench_train --precision bf16" "tiny small long" none 3
  } > "$D/ab.md"
fi
build/relpos_bench_ops --threads 2 > "$D/ops.jsonl" 2>&1
{
  bench/.venv-torch2/bin/python bench/torch_ops.py --threads 2 --filter attention
  bench/.venv-torch2/bin/python bench/torch_ops.py --threads 2 --filter matmul | grep -v '"meta"'
} > "$D/ops_torch.jsonl" 2>&1
python3 bench/roofline.py "$D" > "$D/roofline.md" 2>&1
echo done > "$D/run.done"
