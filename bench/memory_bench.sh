#!/usr/bin/env bash
# bench/memory_bench.sh — peak RSS of a training run, fused attention vs the materialised
# (reference) path, at seq_len 1k, 2k, 4k, 8k (issue 9: O(L) attention memory).
#   bench/memory_bench.sh [PE ...]          default: t5 alibi       (LENS="1024 2048 4096 8192")
# Each cell: `relpos train configs/decoder_<PE>.yaml` (d_model 128, 2 layers, 4 heads) with
# batch_size B (default 1), seq_len = max_len = L, STEPS steps (default 3), one eval batch,
# under /usr/bin/time; "refused" = the up-front memory check said it would not fit (exit 2).
# Then the demo: batch 4 at L = 8192, where the reference path's [B, H, L, L] tensors need
# ~40 GiB and the fused path trains. Prints one Markdown table; runs go to a temp dir.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RELPOS="${RELPOS:-$ROOT/build/relpos}"
[[ -x "$RELPOS" ]] || { echo "build relpos first (scripts/build.sh): $RELPOS not found" >&2; exit 2; }
PES=("$@"); [[ ${#PES[@]} -eq 0 ]] && PES=(t5 alibi)
LENS=${LENS:-"1024 2048 4096 8192"}
B=${B:-1}
STEPS=${STEPS:-3}
THREADS=${THREADS:-2}
work=$(mktemp -d /tmp/relpos_membench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$ROOT"

cell() {  # pe L path batch -> one table row
  local pe=$1 L=$2 path=$3 batch=$4 out="$work/$1_$2_$3_$4"
  local args=(configs/decoder_$pe.yaml --set data.seq_len=$L --set model.max_len=$L --set data.batch_size=$batch
    --set model.attention=$path --set train.steps=$STEPS --set optim.warmup=0 --set train.eval_every=$STEPS
    --set train.eval_batches=1 --set train.log_every=1 --set train.checkpoint_every=0 --set train.threads=$THREADS
    --set output.dir="$out")
  local est
  est=$("$RELPOS" validate "${args[@]}" --ignore-memory-check 2>&1 | sed -n 's/.*estimated memory \([0-9.]* [KMGTPE]*i*B\).*/\1/p')
  local rc=0
  /usr/bin/time -f "%M %e" -o "$work/time" "$RELPOS" train "${args[@]}" > "$work/log" 2>&1 || rc=$?
  if [[ $rc -eq 2 ]] && grep -q "estimated" "$work/log"; then
    echo "| $L | $pe | $batch | $path | $est | refused: does not fit | | |"
  elif [[ $rc -ne 0 ]]; then
    echo "| $L | $pe | $batch | $path | $est | FAILED (exit $rc): $(tail -1 "$work/log") | | |"
  else
    read -r kb secs < "$work/time"
    local loss
    loss=$(python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print('%.4f' % [x for x in r if 'loss' in x][-1]['loss'])" "$out/metrics.jsonl")
    echo "| $L | $pe | $batch | $path | $est | $((kb / 1024)) | $secs | $loss |"
  fi
  rm -rf "$out"
}

echo "$("$RELPOS" --version 2>/dev/null | head -1), $THREADS threads, $STEPS steps, $(date -u +%Y-%m-%d)"
echo
echo "| seq_len | PE | batch | attention | estimate | peak RSS MB | wall s | last loss |"
echo "|---:|---|---:|---|---:|---:|---:|---:|"
for L in $LENS; do
  for pe in "${PES[@]}"; do
    for path in fused reference; do cell "$pe" "$L" "$path" "$B"; done
  done
done
for pe in "${PES[@]}"; do
  for path in fused reference; do cell "$pe" 8192 "$path" 4; done
done
