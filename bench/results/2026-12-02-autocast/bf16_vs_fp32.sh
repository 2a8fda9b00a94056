#!/bin/bash
sz() { case $1 in tiny) echo "--d-model 128 --layers 2 --heads 4 --seq 128 --batch 16 --warmup 2 --steps 10";; small) echo "--d-model 256 --layers 4 --heads 8 --seq 256 --batch 8 --warmup 1 --steps 4";; esac; }
for rep in 1 2 3; do for size in tiny small; do for pos in none t5 rope; do for prec in fp32 bf16; do
  ms=$(build/relpos_bench_train $(sz $size) --pos $pos --threads 2 --precision $prec 2>&1 | grep -o '"ms_per_step_median":[0-9.]*' | cut -d: -f2)
  echo "$rep $size $pos $prec $ms"
done; done; done; done
