#!/usr/bin/env bash
# bench/run_train_bench.sh [THREADS] [--check] [--check-only]
# Training-step benchmark, relpos (build/relpos_bench_train) vs PyTorch (bench/torch_train.py,
# Debian's python3-torch via /usr/bin/python3; with PEERS, also PyTorch 2.x eager and compiled,
# see below), same architecture, same step, same threads.
#   sizes: tiny  = d_model 128, 2 layers, 4 heads, seq 128, batch 16   (TINY_WARMUP + TINY_STEPS)
#          small = d_model 256, 4 layers, 8 heads, seq 256, batch 8    (SMALL_WARMUP + SMALL_STEPS)
#          long  = d_model 128, 2 layers, 4 heads, seq 2048, batch 1  (LONG_WARMUP + LONG_STEPS)
#   PE:    none t5 alibi rope shaw                                      (override: POS="t5 rope")
#   SIZES="tiny small" selects sizes (default; add long).
# Prints one Markdown table (ms/step = median of the timed steps). The raw JSON lines go to
# bench/out/train_T<threads>_<date>.jsonl.
# --check: first, per PE (tiny size, 3 steps), relpos dumps its initial weights and batches,
#   torch loads them, and the per-step losses of both must agree (|diff| < 1e-3), i.e. the same
#   model, loss, clipping and AdamW; a second table shows the differences.
# --check-only: only the check.
# PEERS="torch113 torch2 torch2c" picks the PyTorch columns (default "torch113": Debian's torch
# only):
#   torch113  bench/torch_train.py with Debian's /usr/bin/python3 (torch 1.13), eager, AdamW(foreach=False)
#   torch2    bench/torch2_train.py with PyTorch 2.x from PyPI in bench/.venv-torch2 (TORCH2_VENV
#             overrides): F.scaled_dot_product_attention (is_causal for none/rope, a float
#             bias+causal mask for t5/alibi, Shaw materialised), AdamW fused=True if this torch
#             has a fused CPU kernel, else foreach=True (the JSON's "optimizer" field says which)
#   torch2c   the same under torch.compile (default mode); compiled in the warmup steps, untimed
#   Each PE runs relpos and then every peer, in PEERS order. The torch2 peers need the venv:
#   run bench/setup_torch2.sh once (PyPI torch + numpy, ~6 GB); without it this script exits 2.
#   --check cross-checks every peer's losses against relpos' (|diff| < 1e-3).
# PRECISION=bf16: relpos --precision bf16 against the torch2 peers under
#   torch.autocast(dtype=bfloat16) (torch113 is fp32 only); default fp32.
# ROUNDS=N (default 1): N rounds of every cell, relpos first in odd rounds and last in even ones,
#   a table per round (raw JSON lines: bench/out/train_T<threads>_<date>_round<k>.jsonl) and then
#   the median over the rounds with ratio = faster peer median / relpos median
#   (bench/summarise_rounds.py): on a machine whose speed drifts, the numbers to quote.
# RELPOS_GEMM=openblas|onednn (kernels/cpu/gemm.h) is passed through to relpos.
# Machine-speed probe: right before each cell (each round), relpos_bench_ops times relpos's
#   float32 GEMM at the small model's 2048x256x1024 shape (~1 s) and the relpos line of the cell
#   carries it as "probe_gflops" (summarise_rounds.py prints it per round). On a shared VM the
#   same binary's step can move 150 -> 195 ms within an hour, and this probe moves with it: a
#   ratio from a slow phase reads differently from one taken at full speed. PROBE=0 skips it.
#   Smoke test: TINY_WARMUP=1 TINY_STEPS=2 SIZES=tiny POS="none t5" PEERS="torch2 torch2c" \
#               bench/run_train_bench.sh --check
set -euo pipefail

THREADS=2
CHECK=0
RUN=1
for arg in "$@"; do
  case "$arg" in
    --check) CHECK=1 ;;
    --check-only) CHECK=1; RUN=0 ;;
    -h|--help) sed -n '2,41p' "$0"; exit 0 ;;
    *) [[ "$arg" =~ ^[0-9]+$ ]] || { echo "usage: $0 [THREADS] [--check] [--check-only]" >&2; exit 2; }; THREADS="$arg" ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
BIN="$BUILD/relpos_bench_train"
PY=/usr/bin/python3
TORCH="$ROOT/bench/torch_train.py"
TORCH2="$ROOT/bench/torch2_train.py"
TORCH2_VENV="${TORCH2_VENV:-$ROOT/bench/.venv-torch2}"
PY2="$TORCH2_VENV/bin/python"
PEERS=${PEERS:-torch113}
OUTDIR="$ROOT/bench/out"
mkdir -p "$OUTDIR"

TINY_WARMUP=${TINY_WARMUP:-3}
TINY_STEPS=${TINY_STEPS:-10}
SMALL_WARMUP=${SMALL_WARMUP:-2}
SMALL_STEPS=${SMALL_STEPS:-4}
LONG_WARMUP=${LONG_WARMUP:-1}
LONG_STEPS=${LONG_STEPS:-3}
POS=${POS:-"none t5 alibi rope shaw"}
ROUNDS=${ROUNDS:-1}
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS=$ROUNDS: expected a positive integer" >&2; exit 2; }
SIZES=${SIZES:-"tiny small"}

# run_peer PEER ARGS...: one peer run with the shared arguments (+ --load DIR); one JSON line.
run_peer() {
  local peer="$1"; shift
  case "$peer" in
    torch113) "$PY" "$TORCH" "$@" ;;
    torch2) "$PY2" "$TORCH2" "$@" ;;
    torch2c) "$PY2" "$TORCH2" --compile "$@" ;;
  esac
}
NEED_TORCH2=0
for peer in $PEERS; do
  case "$peer" in
    torch113) ;;
    torch2|torch2c) NEED_TORCH2=1 ;;
    *) echo "PEERS: unknown peer '$peer' (known: torch113 torch2 torch2c)" >&2; exit 2 ;;
  esac
done
[[ -n "${PEERS// /}" ]] || { echo "PEERS is empty (known: torch113 torch2 torch2c)" >&2; exit 2; }
if [[ $NEED_TORCH2 == 1 ]] && ! { [[ -x "$PY2" ]] && "$PY2" -c "import torch, numpy" 2>/dev/null; }; then
  echo "PEERS=\"$PEERS\" needs PyTorch 2.x in $TORCH2_VENV, which is missing." >&2
  echo "Run bench/setup_torch2.sh once (creates the venv, pip installs torch + numpy from PyPI, ~6 GB)." >&2
  exit 2
fi

# Build (incremental; a no-op when up to date). Keep -j2: the machine is shared.
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S "$ROOT" -B "$BUILD" >/dev/null
fi
cmake --build "$BUILD" -j2 --target relpos_bench_train relpos_bench_ops >/dev/null
PROBE=${PROBE:-1}
# probe_gflops: relpos's float32 GEMM 2048x256x1024 on THREADS threads now, in GFLOP/s ("null"
# when PROBE=0 or the probe printed nothing).
probe_gflops() {
  local g=""
  if [[ $PROBE != 0 ]]; then
    g="$("$BUILD/relpos_bench_ops" --threads "$THREADS" --filter "matmul 2048x256x1024" 2>/dev/null |
      "$PY" -c 'import json, sys
for line in sys.stdin:
    d = json.loads(line)
    if d.get("op") == "matmul":
        print(d["gflops"])' 2>/dev/null || true)"
  fi
  echo "${g:-null}"
}

# Same thread count for both, everywhere (OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left alone).
export OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS"

size_args() {
  case "$1" in
    tiny) echo "--d-model 128 --layers 2 --heads 4 --seq 128 --batch 16 --warmup $TINY_WARMUP --steps $TINY_STEPS" ;;
    small) echo "--d-model 256 --layers 4 --heads 8 --seq 256 --batch 8 --warmup $SMALL_WARMUP --steps $SMALL_STEPS" ;;
    long) echo "--d-model 128 --layers 2 --heads 4 --seq 2048 --batch 1 --warmup $LONG_WARMUP --steps $LONG_STEPS" ;;
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
    for peer in $PEERS; do
      # shellcheck disable=SC2086
      run_peer "$peer" $args --load "$dir" >>"$CHK"
    done
    rm -rf "$dir"
  done
  "$PY" - "$CHK" <<'EOF'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by, peers = {}, []
for r in rows:
    by.setdefault(r["pos"], {})[r["impl"]] = r
    if r["impl"] != "relpos" and r["impl"] not in peers:
        peers.append(r["impl"])
head = "| PE | relpos losses (3 steps) | " + "".join(f"{p} losses | max abs diff | " for p in peers) + "ln(65) | ok |"
print(head)
print("|---" * (head.count("|") - 1) + "|")
bad = 0
fmt = lambda v: ", ".join(f"{x:.6f}" for x in v)
for pos, d in by.items():
    a = d["relpos"]["losses"]
    cells, ok = [], True
    for p in peers:
        if p not in d:
            cells += ["missing", "-"]; ok = False
            continue
        b = d[p]["losses"]
        diff = max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else math.inf
        ok = ok and diff < 1e-3
        cells += [fmt(b), f"{diff:.2e}"]
    bad += not ok
    print(f"| {pos} | {fmt(a)} | " + "".join(c + " | " for c in cells) + f"{math.log(65):.4f} | {'yes' if ok else 'NO'} |")
print()
sys.exit(1 if bad else 0)
EOF
fi

[[ $RUN == 1 ]] || exit 0

STAMP="$(date +%Y%m%d_%H%M%S)"
ALL=()
for round in $(seq "$ROUNDS"); do
  RES="$OUTDIR/train_T${THREADS}_${STAMP}.jsonl"
  [[ $ROUNDS == 1 ]] || RES="$OUTDIR/train_T${THREADS}_${STAMP}_round$round.jsonl"
  : >"$RES"
  for size in $SIZES; do
    for pos in $POS; do
      args="$(size_args "$size") --threads $THREADS --pos $pos"
      [[ "${PRECISION:-fp32}" == fp32 ]] || args="$args --precision $PRECISION"
      # relpos first in odd rounds, last in even ones: a drift of the machine's speed during a
      # cell does not always favour the same side.
      impls=(relpos $PEERS)
      (( round % 2 == 0 )) && impls=($PEERS relpos)
      probe="$(probe_gflops)"
      for impl in "${impls[@]}"; do
        if [[ $impl == relpos ]]; then
          # shellcheck disable=SC2086
          "$BIN" $args | sed "s/^{/{\"size\":\"$size\",\"probe_gflops\":$probe,/" >>"$RES"
        else
          # shellcheck disable=SC2086
          run_peer "$impl" $args | sed "s/^{/{\"size\":\"$size\",/" >>"$RES"
        fi
      done
      echo "# done $size $pos (round $round of $ROUNDS)" >&2
    done
  done
  echo "# uptime after: $(uptime)" >&2
  echo "# raw results: $RES" >&2
  ALL+=("$RES")
  [[ $ROUNDS == 1 ]] || echo "## Round $round of $ROUNDS"
  "$PY" "$ROOT/bench/train_table.py" "$RES"
done
if [[ $ROUNDS != 1 ]]; then
  echo "## Median over the $ROUNDS rounds (ratio = faster peer median / relpos median, above 1: relpos faster)"
  echo
  "$PY" "$ROOT/bench/summarise_rounds.py" "${ALL[@]}"
fi
