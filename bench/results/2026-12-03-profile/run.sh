#!/bin/bash
# The fourteenth session's measurements, in one sequence on a quiet machine (nothing else running):
#  1. where the step's GEMM time goes: RELPOS_GEMM_PROFILE=1 on tiny and small, no encoding,
#     fp32 and bf16, 2 threads (gemm_*.md, the step's JSON in gemm_*.json);
#  2. relpos vs PyTorch 2.15 eager and compiled, fp32: three rounds of every PE on tiny and small,
#     three of long none/rope and one of long t5/alibi/shaw; bf16: three rounds of none/t5/rope on
#     tiny and small (train_<prec>_*.jsonl; python3 bench/summarise_rounds.py fp32|bf16 DIR).
# thp_ab.txt is an earlier A/B, of 900365d (the allocator's blocks of 2 MiB and more on
# transparent huge pages, RELPOS_THP=0 vs 1; reverted after it): 6 interleaved pairs per cell,
# "rep threads size PE thp ms/step peak_RSS_MB final_loss"; python3 thp_ab.py summarises it.
set -u
D=$(cd "$(dirname "$0")" && pwd)
cd "$D/../../.."
B=build/relpos_bench_train
sz() { case $1 in tiny) echo "--d-model 128 --layers 2 --heads 4 --seq 128 --batch 16 --warmup 3 --steps 15";; small) echo "--d-model 256 --layers 4 --heads 8 --seq 256 --batch 8 --warmup 2 --steps 6";; esac; }
for size in tiny small; do for prec in fp32 bf16; do
  RELPOS_GEMM_PROFILE=1 $B $(sz $size) --pos none --threads 2 --precision $prec > "$D/gemm_${size}_${prec}.json" 2> "$D/gemm_${size}_${prec}.md"
done; done
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
