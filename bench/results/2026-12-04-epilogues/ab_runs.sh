#!/bin/bash
# The alternating A/B used during the twentieth session: ab_runs.sh OLD_BIN NEW_BIN RUNS ["tiny small long"] ["fp32 bf16"];
# POS=... selects encodings (default none). Prints the median, range and speed-up per cell.
OLD=$1; NEW=$2; RUNS=$3; SIZES=${4:-"tiny small"}; PRECS=${5:-"fp32 bf16"}; POS=${POS:-none}
args() { case "$1" in
 tiny) echo "--d-model 128 --layers 2 --heads 4 --seq 128 --batch 16 --warmup 2 --steps 10" ;;
 small) echo "--d-model 256 --layers 4 --heads 8 --seq 256 --batch 8 --warmup 1 --steps 4" ;;
 long) echo "--d-model 128 --layers 2 --heads 4 --seq 2048 --batch 1 --warmup 2 --steps 8" ;; esac; }
ms() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["ms_per_step_median"])'; }
for s in $SIZES; do for p in $PRECS; do for pos in $POS; do
  o=(); n=()
  for i in $(seq $RUNS); do
    o+=($($OLD $(args $s) --pos $pos --threads 2 --precision $p 2>/dev/null | ms))
    n+=($($NEW $(args $s) --pos $pos --threads 2 --precision $p 2>/dev/null | ms))
  done
  python3 -c "
import statistics as st,sys
o=[float(x) for x in '${o[*]}'.split()]; n=[float(x) for x in '${n[*]}'.split()]
print(f'$s $p $pos old {st.median(o):.1f} ({min(o):.1f}-{max(o):.1f}) new {st.median(n):.1f} ({min(n):.1f}-{max(n):.1f}) speed-up {st.median(o)/st.median(n):.3f}')"
done; done; done
