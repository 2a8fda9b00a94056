#!/bin/bash
# The thirteenth session's measurements, in one sequence on a quiet machine:
#  1. A/B of the GELU epilogue: /work/old (3cc465a, before) vs this tree's build, interleaved,
#     1 and 2 threads, tiny/small none/rope (bench/compare_commits.sh), plus peak RSS and final
#     loss per run (ab_rss.txt);
#  2. three rounds of the cells issue 20 sets >= 1.3 on (tiny/small, fp32, none/rope) against
#     PyTorch 2.15 eager and compiled (bench/run_train_bench.sh), and one bf16 round (issue 21);
#  3. the op peaks (GEMM shapes of both models, attention) with PyTorch's python.
set -u
D=$(cd "$(dirname "$0")" && pwd)
cd "$D/../../.."
OLD=/work/old/build/relpos_bench_train NEW=build/relpos_bench_train
REPEATS=7 POS="none rope" bench/compare_commits.sh $OLD $NEW 1 > "$D/ab_1t.md" 2>&1
REPEATS=7 POS="none rope" bench/compare_commits.sh $OLD $NEW 2 > "$D/ab_2t.md" 2>&1
sz() { case $1 in tiny) echo "--d-model 128 --layers 2 --heads 4 --seq 128 --batch 16 --warmup 2 --steps 10";; small) echo "--d-model 256 --layers 4 --heads 8 --seq 256 --batch 8 --warmup 1 --steps 4";; esac; }
for rep in 1 2 3; do for size in tiny small; do for prec in fp32 bf16; do for v in old new; do
  bin=$NEW; [ $v = old ] && bin=$OLD
  out=$(OMP_NUM_THREADS=1 $bin $(sz $size) --pos none --threads 1 --precision $prec 2>&1)
  ms=$(echo "$out" | grep -o '"ms_per_step_median":[0-9.]*' | cut -d: -f2)
  rss=$(echo "$out" | grep -o '"peak_rss_mb":[0-9.]*' | cut -d: -f2)
  loss=$(echo "$out" | grep -o '"final_loss":[0-9.]*' | cut -d: -f2)
  echo "$rep $size $prec $v $ms $rss $loss"
done; done; done; done > "$D/ab_rss.txt"
for r in 1 2 3; do
  SIZES="tiny small" POS="none rope" PEERS="torch2 torch2c" bench/run_train_bench.sh 2 > "$D/train_fp32_round$r.md" 2>&1
  cp "$(ls -t bench/out/train_T2_*.jsonl | head -1)" "$D/train_fp32_round$r.jsonl"
done
PRECISION=bf16 SIZES="tiny small" POS="none t5 rope" PEERS="torch2 torch2c" bench/run_train_bench.sh 2 > "$D/train_bf16_round1.md" 2>&1
cp "$(ls -t bench/out/train_T2_*.jsonl | head -1)" "$D/train_bf16_round1.jsonl"
PYTHON=bench/.venv-torch2/bin/python bench/run_ops_bench.sh 2 > "$D/ops_T2.md" 2>&1
echo done > "$D/run.done"
