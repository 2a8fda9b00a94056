#!/usr/bin/env bash
# bench/run_ops_bench.sh [THREADS] — relpos vs PyTorch on float32 matmul (sgemm) and softmax.
# Builds relpos_bench_ops if needed, runs it and bench/torch_ops.py one after the other with
# the same thread count (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, k::set_num_threads and
# torch.set_num_threads all = THREADS; OPENBLAS_CORETYPE is left as it is), and prints one
# markdown table. Raw JSON lines go to bench/out/ops_{relpos,torch}_tT.jsonl.
# Env: BUILD_DIR (default build), PYTHON (default /usr/bin/python3, needs torch).
set -euo pipefail

THREADS="${1:-1}"
if ! [[ "$THREADS" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 [THREADS]   (THREADS a positive integer, default 1)" >&2
  exit 2
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
PYTHON="${PYTHON:-/usr/bin/python3}"
OUT_DIR="$ROOT/bench/out"
mkdir -p "$OUT_DIR"

if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >&2
fi
cmake --build "$BUILD_DIR" --target relpos_bench_ops -j"$(nproc)" >&2
BIN="$BUILD_DIR/relpos_bench_ops"

# The numbers mean little on a busy machine, so the table says how much CPU other processes
# used while the benchmarks ran: all busy CPU time (from /proc/stat) minus this script's
# children, as a share of the run's wall time x CPUs.
busy_ticks() { local c; c=($(head -n 1 /proc/stat)); echo $(( c[1] + c[2] + c[3] + c[6] + c[7] + c[8] )); }
all_ticks() { local c i t=0; c=($(head -n 1 /proc/stat)); for i in 1 2 3 4 5 6 7 8; do t=$(( t + c[i] )); done; echo "$t"; }
TIMES_FILE="$(mktemp)"; trap 'rm -f "$TIMES_FILE"' EXIT
# Sets REPLY to the user + sys CPU time of this shell's finished children, in clock ticks.
# Call it directly, not in $(...): a subshell would report its own (no) children.
child_ticks() {
  times >"$TIMES_FILE"  # a builtin with a redirect runs in this shell
  REPLY=$(awk -v tk="$(getconf CLK_TCK)" 'END { t = 0
    for (i = 1; i <= NF; ++i) { split($i, p, "m"); t += p[1] * 60 + p[2] }  # "1m2.5s"
    printf "%d\n", t * tk + 0.5 }' "$TIMES_FILE")
}
child_ticks; CHILD0=$REPLY; BUSY0="$(busy_ticks)"; ALL0="$(all_ticks)"

export OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS"
RELPOS_OUT="$OUT_DIR/ops_relpos_t$THREADS.jsonl"
TORCH_OUT="$OUT_DIR/ops_torch_t$THREADS.jsonl"
echo "running relpos_bench_ops --threads $THREADS ..." >&2
"$BIN" --threads "$THREADS" >"$RELPOS_OUT"
echo "running torch_ops.py --threads $THREADS ..." >&2
"$PYTHON" "$ROOT/bench/torch_ops.py" --threads "$THREADS" >"$TORCH_OUT"

BUSY1="$(busy_ticks)"; ALL1="$(all_ticks)"; child_ticks; CHILD1=$REPLY
OTHER_PCT=$(( (ALL1 - ALL0) > 0 ? 100 * ((BUSY1 - BUSY0) - (CHILD1 - CHILD0)) / (ALL1 - ALL0) : 0 ))
(( OTHER_PCT < 0 )) && OTHER_PCT=0

"$PYTHON" - "$RELPOS_OUT" "$TORCH_OUT" "$OTHER_PCT" <<'EOF'
import json, sys

def load(path):
    meta, rows = None, {}
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            if r.get("meta"):
                meta = r
            else:
                rows[(r["op"], r["size"])] = r
    return meta, rows

rmeta, rel = load(sys.argv[1])
tmeta, tor = load(sys.argv[2])
print(f"threads: relpos {rmeta['threads']} (omp {rmeta['omp_max_threads']}, openblas "
      f"{rmeta['openblas_threads']}), torch {tmeta['torch_threads']} "
      f"(torch {tmeta['torch_version']}); {rmeta['openblas_config']}")
print(f"method: per case >= {rmeta['warmup_ms']:g} ms (>= {rmeta['warmup']} calls) of warmup, median of {rmeta['samples']} samples, each the mean "
      f"of back-to-back calls filling >= {rmeta['min_sample_ms']} ms (1 call for slower ops)")
print(f"relpos GEMM: float32 {rmeta.get('gemm_f32', '?')}; bf16 operands {rmeta.get('gemm_bf16', '?')}")
other = int(sys.argv[3])
print(f"CPU used by other processes during the runs: {other}% of all CPUs"
      + ("  ** machine not idle: numbers are unreliable **" if other > 5 else ""))
print()
print("| op | size | relpos ms | torch ms | relpos/torch | relpos GFLOP/s |")
print("|---|---|---:|---:|---:|---:|")
for key, r in rel.items():
    t = tor.get(key)
    tms = f"{t['ms']:.4f}" if t else "missing"
    ratio = f"{r['ms'] / t['ms']:.2f}" if t else "-"
    perf = f"{r['gflops']:.1f}" if r.get("gflops") else f"- ({r['gbps']:.1f} GB/s)"
    print(f"| {key[0]} | {key[1]} | {r['ms']:.4f} | {tms} | {ratio} | {perf} |")
for key in tor:
    if key not in rel:
        print(f"| {key[0]} | {key[1]} | missing | {tor[key]['ms']:.4f} | - | - |")
EOF
