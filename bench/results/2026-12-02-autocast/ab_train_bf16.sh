#!/bin/bash
sz() { case $1 in tiny) echo "--d-model 128 --layers 2 --heads 4 --seq 128 --batch 16 --warmup 2 --steps 10";; small) echo "--d-model 256 --layers 4 --heads 8 --seq 256 --batch 8 --warmup 1 --steps 4";; long) echo "--d-model 128 --layers 2 --heads 4 --seq 2048 --batch 1 --warmup 1 --steps 5";; esac; }
for rep in 1 2 3 4 5 6; do for size in tiny small; do for v in before after; do
  bin=/work/main/build/relpos_bench_train; [ $v = before ] && bin=/work/before/build/relpos_bench_train
  ms=$($bin $(sz $size) --pos none --threads ${T:-1} --precision bf16 2>&1 | grep -o '"ms_per_step_median":[0-9.]*' | cut -d: -f2)
  echo "$rep $size none bf16 $v $ms"
done; done; done
