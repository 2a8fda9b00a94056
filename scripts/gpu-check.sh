#!/usr/bin/env bash
# scripts/gpu-check.sh — the GPU verification of issue 8, one script for a machine with an
# NVIDIA GPU (run it from the repository root; writes its report to ${OUT:-gpu-check-out}/):
#   1. build with CUDA (build-gpu/, Release, TF32 off by default)
#   2. the CUDA ctest label (CPU-vs-CUDA parity of every kernel) and the backend harness
#   3. configs/quickstart.yaml for 100 steps on the CPU and on CUDA with the same seed:
#      the train loss at every logged step must agree to a relative 1e-3
#   4. every config in configs/ trains 5 steps with train.device=cuda
#   5. the training benchmark on the GPU vs PyTorch CUDA eager on the same model: tiny, small
#      and medium (d_model 512, 8 layers, 8 heads, seq 1024), tokens/s for both
# Exit status: 0 when 1-4 pass (5 only reports). Libraries missing on a GPU machine without
# a package mirror: run scripts/gpu-fetch-debs.sh on a machine with apt first and carry
# .gpu-debs/ (unpacked here into / when yaml-cpp or fmt are missing).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-check-out}
mkdir -p "$OUT"
LOG="$OUT/gpu-check.log"
exec > >(tee "$LOG") 2>&1
fail=0
step() { echo; echo "== $* ($(date +%T))"; }

step "0. machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv 2>&1 | head -5
nvcc --version | tail -1
if ! ls /usr/include/yaml-cpp/yaml.h /usr/include/fmt/format.h >/dev/null 2>&1; then
  if ls .gpu-debs/*.deb >/dev/null 2>&1; then
    echo "unpacking $(ls .gpu-debs/*.deb | wc -l) carried .deb files"
    for f in .gpu-debs/*.deb; do dpkg -x "$f" /; done
    ldconfig
  else
    echo "missing yaml-cpp/fmt headers and no .gpu-debs/: run scripts/gpu-fetch-debs.sh where apt works"; exit 1
  fi
fi

step "1. build (CUDA on)"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DRELPOS_CUDA=ON -DRELPOS_NATIVE=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build build-gpu -j "$(nproc)" > "$OUT/build.log" 2>&1 || { grep -m20 -E "error" "$OUT/build.log"; exit 1; }
build-gpu/relpos info || true

step "2. CUDA tests + backend harness"
(cd build-gpu && ctest -L cuda --output-on-failure) || fail=1
(cd build-gpu && ctest -R "backend" --output-on-failure -j 8) || fail=1

step "3. quickstart 100 steps: CPU vs CUDA loss curves (float32, TF32 off)"
rm -rf "$OUT/qs_cpu" "$OUT/qs_cuda" /tmp/relpos-qs-cpu /tmp/relpos-qs-cuda
common=(--set train.steps=100 --set train.log_every=10 --set train.eval_every=100 --set train.checkpoint_every=0)
build-gpu/relpos train configs/quickstart.yaml "${common[@]}" --set output.dir=/tmp/relpos-qs-cpu \
  --set train.device=cpu > "$OUT/qs_cpu.txt" 2>&1 || { fail=1; tail -5 "$OUT/qs_cpu.txt"; }
build-gpu/relpos train configs/quickstart.yaml "${common[@]}" --set output.dir=/tmp/relpos-qs-cuda \
  --set train.device=cuda > "$OUT/qs_cuda.txt" 2>&1 || { fail=1; tail -5 "$OUT/qs_cuda.txt"; }
python3 - /tmp/relpos-qs-cpu/metrics.jsonl /tmp/relpos-qs-cuda/metrics.jsonl <<'PY' || fail=1
import json, sys
def curve(p):
    return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r and not r.get("skipped")}
a, b = curve(sys.argv[1]), curve(sys.argv[2])
steps = sorted(set(a) & set(b))
worst = 0.0
print("| step | cpu loss | cuda loss | rel diff |\n|---:|---:|---:|---:|")
for s in steps:
    d = abs(a[s] - b[s]) / max(abs(a[s]), 1e-12)
    worst = max(worst, d)
    print(f"| {s} | {a[s]:.6f} | {b[s]:.6f} | {d:.2e} |")
ok = len(steps) >= 10 and worst < 1e-3
print(f"worst relative difference {worst:.2e} over {len(steps)} logged steps: {'PASS' if ok else 'FAIL'} (bound 1e-3)")
sys.exit(0 if ok else 1)
PY

step "4. every config trains on CUDA (5 steps)"
for c in configs/*.yaml; do
  n=$(basename "$c" .yaml)
  if build-gpu/relpos train "$c" --set train.steps=5 --set train.log_every=1 --set train.eval_every=5 \
       --set train.eval_batches=2 --set train.checkpoint_every=0 --set train.device=cuda \
       --set output.dir=/tmp/relpos-cfg-$n > "$OUT/cfg_$n.txt" 2>&1; then
    echo "ok   $n  $(grep -o 'loss [0-9.]*' "$OUT/cfg_$n.txt" | tail -1)"
  else
    echo "FAIL $n: $(tail -2 "$OUT/cfg_$n.txt" | tr '\n' ' ')"; fail=1
  fi
done
# checkpoints are device-independent: evaluate the CUDA-trained quickstart on the CPU
build-gpu/relpos eval /tmp/relpos-qs-cuda || fail=1

step "5. training benchmark on the GPU: relpos vs PyTorch CUDA eager (tokens/s)"
RES="$OUT/bench_gpu.jsonl"; : > "$RES"
sizes=("tiny:--d-model 128 --layers 2 --heads 4 --seq 128 --batch 16 --warmup 5 --steps 20"
       "small:--d-model 256 --layers 4 --heads 8 --seq 256 --batch 8 --warmup 5 --steps 20"
       "medium:--d-model 512 --layers 8 --heads 8 --seq 1024 --batch 4 --warmup 3 --steps 10")
for s in "${sizes[@]}"; do
  name=${s%%:*}; args=${s#*:}
  for pos in none t5 rope; do
    # shellcheck disable=SC2086
    timeout 120 build-gpu/relpos_bench_train $args --pos $pos --device cuda | sed "s/^{/{\"size\":\"$name\",/" >> "$RES" \
      || echo "relpos $name $pos failed"
    # shellcheck disable=SC2086
    timeout 120 python3 bench/torch_train.py $args --pos $pos --device cuda | sed "s/^{/{\"size\":\"$name\",/" >> "$RES" \
      || echo "torch $name $pos failed"
  done
done
python3 - "$RES" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault((r["size"], r["pos"]), {})[r["impl"]] = r
print("| size | PE | relpos tok/s | torch tok/s | relpos / torch |\n|---|---|---:|---:|---:|")
for (size, pos), d in by.items():
    a, b = d.get("relpos"), d.get("torch")
    ra = f'{a["tokens_per_s"]:.0f}' if a else "-"
    rb = f'{b["tokens_per_s"]:.0f}' if b else "-"
    ratio = f'{a["tokens_per_s"] / b["tokens_per_s"]:.2f}' if a and b else "-"
    print(f"| {size} | {pos} | {ra} | {rb} | {ratio} |")
PY

step "done: $([[ $fail == 0 ]] && echo PASS || echo FAIL)"
exit $fail
