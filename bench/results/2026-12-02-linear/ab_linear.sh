#!/bin/bash
# A/B of the twelfth session's step changes: /work/before (00bccbc) vs the working tree's build,
# interleaved, THREADS threads (default 1), ms per step (median of the timed steps) and peak RSS.
T=${THREADS:-1}
sz() { case $1 in tiny) echo "--d-model 128 --layers 2 --heads 4 --seq 128 --batch 16 --warmup 2 --steps 10";; small) echo "--d-model 256 --layers 4 --heads 4 --seq 256 --batch 8 --warmup 1 --steps 4";; esac; }
for rep in 1 2 3 4; do for size in tiny small; do for prec in fp32 bf16; do for v in before after; do
  bin=/work/main/build/relpos_bench_train; [ $v = before ] && bin=/work/before/build/relpos_bench_train
  out=$(OMP_NUM_THREADS=$T $bin $(sz $size) --pos none --threads $T --precision $prec 2>&1)
  ms=$(echo "$out" | grep -o '"ms_per_step_median":[0-9.]*' | cut -d: -f2)
  rss=$(echo "$out" | grep -o '"peak_rss_mb":[0-9.]*' | cut -d: -f2)
  loss=$(echo "$out" | grep -o '"final_loss":[0-9.]*' | cut -d: -f2)
  echo "$rep $size $prec $v $ms $rss $loss"
done; done; done; done
