#!/usr/bin/env bash
# bench/run_train_bench.sh [THREADS] [--check] [--check-only]
# Training-step benchmark, relpos (build/relpos_bench_train) vs PyTorch (bench/torch_train.py,
# Debian's python3-torch via /usr/bin/python3), same architecture, same step, same threads.
#   sizes: tiny  = d_model 128, 2 layers, 4 heads, seq 128, batch 16   (TINY_WARMUP + TINY_STEPS)
#          small = d_model 256, 4 layers, 8 heads, seq 256, batch 8    (SMALL_WARMUP + SMALL_STEPS)
#   PE:    none t5 alibi rope shaw                                      (override: POS="t5 rope")
#   SIZES="tiny small" selects sizes.
# Prints one Markdown table (ms/step = median of the timed steps). The raw JSON lines go to
# bench/out/train_T<threads>_<date>.jsonl.
# --check: first, per PE (tiny size, 3 steps), relpos dumps its initial weights and batches,
#   torch loads them, and the per-step losses of both must agree (|diff| < 1e-3), i.e. the same
#   model, loss, clipping and AdamW; a second table shows the differences.
# --check-only: only the check.
set -euo pipefail

THREADS=2
CHECK=0
RUN=1
for arg in "$@"; do
  case "$arg" in
    --check) CHECK=1 ;;
    --check-only) CHECK=1; RUN=0 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) [[ "$arg" =~ ^[0-9]+$ ]] || { echo "usage: $0 [THREADS] [--check] [--check-only]" >&2; exit 2; }; THREADS="$arg" ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
BIN="$BUILD/relpos_bench_train"
PY=/usr/bin/python3
TORCH="$ROOT/bench/torch_train.py"
OUTDIR="$ROOT/bench/out"
mkdir -p "$OUTDIR"

TINY_WARMUP=${TINY_WARMUP:-3}
TINY_STEPS=${TINY_STEPS:-10}
SMALL_WARMUP=${SMALL_WARMUP:-2}
SMALL_STEPS=${SMALL_STEPS:-4}
POS=${POS:-"none t5 alibi rope shaw"}
SIZES=${SIZES:-"tiny small"}

# Build (incremental; a no-op when up to date). Keep -j2: the machine is shared.
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S "$ROOT" -B "$BUILD" >/dev/null
fi
cmake --build "$BUILD" -j2 --target relpos_bench_train >/dev/null

# Same thread count for both, everywhere (OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left alone).
export OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS"

size_args() {
  case "$1" in
    tiny) echo "--d-model 128 --layers 2 --heads 4 --seq 128 --batch 16 --warmup $TINY_WARMUP --steps $TINY_STEPS" ;;
    small) echo "--d-model 256 --layers 4 --heads 8 --seq 256 --batch 8 --warmup $SMALL_WARMUP --steps $SMALL_STEPS" ;;
    *) echo "unknown size $1" >&2; exit 2 ;;
  esac
}

echo "# uptime before: $(uptime)" >&2

if [[ $CHECK == 1 ]]; then
  CHK="$OUTDIR/check_T${THREADS}.jsonl"
  : >"$CHK"
  for pos in $POS; do
    dir="$(mktemp -d)"
    args="--d-model 128 --layers 2 --heads 4 --seq 128 --batch 16 --warmup 1 --steps 2 --threads $THREADS --pos $pos"
    # shellcheck disable=SC2086
    "$BIN" $args --dump "$dir" >>"$CHK"
    # shellcheck disable=SC2086
    "$PY" "$TORCH" $args --load "$dir" >>"$CHK"
    rm -rf "$dir"
  done
  "$PY" - "$CHK" <<'EOF'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["pos"], {})[r["impl"]] = r
print("| PE | relpos losses (3 steps) | torch losses | max abs diff | ln(65) | ok |")
print("|---|---|---|---|---|---|")
bad = 0
for pos, d in by.items():
    a, b = d["relpos"]["losses"], d["torch"]["losses"]
    diff = max(abs(x - y) for x, y in zip(a, b))
    ok = diff < 1e-3
    bad += not ok
    fmt = lambda v: ", ".join(f"{x:.6f}" for x in v)
    print(f"| {pos} | {fmt(a)} | {fmt(b)} | {diff:.2e} | {math.log(65):.4f} | {'yes' if ok else 'NO'} |")
print()
sys.exit(1 if bad else 0)
EOF
fi

[[ $RUN == 1 ]] || exit 0

RES="$OUTDIR/train_T${THREADS}_$(date +%Y%m%d_%H%M%S).jsonl"
for size in $SIZES; do
  for pos in $POS; do
    args="$(size_args "$size") --threads $THREADS --pos $pos"
    # shellcheck disable=SC2086
    "$BIN" $args | sed "s/^{/{\"size\":\"$size\",/" >>"$RES"
    # shellcheck disable=SC2086
    "$PY" "$TORCH" $args | sed "s/^{/{\"size\":\"$size\",/" >>"$RES"
    echo "# done $size $pos" >&2
  done
done
echo "# uptime after: $(uptime)" >&2
echo "# raw results: $RES" >&2

"$PY" "$ROOT/bench/train_table.py" "$RES"
