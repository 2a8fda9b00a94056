#!/bin/bash
# After the AMX tile path (c7ec3be): three rounds of relpos bf16 vs PyTorch 2.15 bf16 autocast
# (eager and compiled, 2 threads; tiny/small/long with none, t5, rope), then relpos bf16 against
# relpos float32, same binary, five alternating runs per cell (bf16_vs_fp32.md). Quiet machine.
# Summarise: the round files directly,
#   python3 bench/summarise_rounds.py DIR/final_bf16_round*.jsonl
set -u
D=$(cd "$(dirname "$0")" && pwd)
cd "$D/../../.."
for r in 1 2 3; do
  PRECISION=bf16 SIZES="tiny small long" POS="none t5 rope" PEERS="torch2 torch2c" bench/run_train_bench.sh 2 > "$D/final_bf16_round$r.md" 2>&1
  cp "$(ls -t bench/out/train_T2_*.jsonl | head -1)" "$D/final_bf16_round$r.jsonl"
done
args() {
  case "$1" in
    tiny) echo "--d-model 128 --layers 2 --heads 4 --seq 128 --batch 16 --warmup 2 --steps 10" ;;
    small) echo "--d-model 256 --layers 4 --heads 8 --seq 256 --batch 8 --warmup 1 --steps 4" ;;
    long) echo "--d-model 128 --layers 2 --heads 4 --seq 2048 --batch 1 --warmup 2 --steps 8" ;;
  esac
}
{
  echo "| size | PE | fp32 ms/step (runs) | bf16 ms/step (runs) | fp32/bf16 (medians) |"
  echo "|---|---|---|---|---:|"
  for size in tiny small long; do
    for pos in none t5 rope; do
      f=(); b=()
      for i in 1 2 3 4 5; do
        for prec in fp32 bf16; do
          ms=$(build/relpos_bench_train $(args $size) --pos $pos --threads 2 --precision $prec 2>/dev/null | tail -1 |
            python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["ms_per_step_median"])')
          if [ $prec = fp32 ]; then f+=("$ms"); else b+=("$ms"); fi
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
echo done > "$D/run_final.done"
