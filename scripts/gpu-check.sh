#!/usr/bin/env bash
# scripts/gpu-check.sh — the GPU verification (issues 8 and 19), in two phases that each fit in
# one short command on a GPU machine (H200, 16 cores: each phase is capped at 7 minutes):
#
#   scripts/gpu-check.sh build     carried dependencies (if missing), configure, build with CUDA
#   scripts/gpu-check.sh check     CUDA ctest (RELPOS_REQUIRE_CUDA=1), CPU-vs-CUDA loss curve,
#                                  every config 5 steps on CUDA, then the benchmark vs PyTorch
#                                  CUDA eager in the time left
#   scripts/gpu-check.sh PHASE --dry-run   print each part's commands and time budget, run nothing
#   scripts/gpu-check.sh --dry-run         both phases
#   scripts/gpu-check.sh deps-configure    (any machine with nvcc) configure against a scratch
#                                  prefix holding only the carried .deb files, and check that
#                                  every dependency came from there
#
# Each part runs under its own `timeout` and prints one line "PASS|FAIL|SKIP part (N s): ...";
# the phase ends with a summary line and exits 1 when a part failed (the benchmark only
# reports). Rerunnable: the build continues incrementally (a build cut off by its timeout
# resumes when rerun), training runs go to a temporary directory removed at exit, and a
# phase replaces only its own files in the output folder ${OUT:-gpu-check-out}/ (7 files):
#   build.log build-detail.log                 the build phase (summary; configure + compiler output)
#   check.log ctest.txt curve.txt configs.txt bench.jsonl   the check phase
#
# Dependencies: where a header of yaml-cpp, fmt, Catch2, CLI11, nlohmann-json or OpenBLAS
# (OpenMP) is missing, `build` unpacks the .deb files carried in .gpu-debs/ (fetched by
# scripts/gpu-fetch-debs.sh where apt works; about 14 MB, git-ignored) into the prefix .gpu-deps/
# with python3 (no dpkg needed) and configures against it. RELPOS_DEPS=carried forces that.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export ROOT OUT=${OUT:-gpu-check-out} BUILD=${RELPOS_GPU_BUILD:-build-gpu}
export PREFIX=${RELPOS_DEPS_PREFIX:-$ROOT/.gpu-deps} DEBS=$ROOT/.gpu-debs
CAP=420  # seconds per phase: well under 8 minutes (a command may run at most 10), with the machine start on top

phase="" dry=0
for a in "$@"; do
  case $a in
    build | check | deps-configure) phase=$a ;;
    --dry-run) dry=1 ;;
    *) sed -n '2,25p' "$0"; exit 2 ;;
  esac
done
[[ -z $phase && $dry == 0 ]] && { sed -n '2,25p' "$0"; exit 2; }

# ------------------------------------------------------------------ the parts of each phase
# part NAME BUDGET_S COMMANDS: COMMANDS run as `bash -o pipefail -c` under `timeout BUDGET_S` (budget
# "rest": what the phase cap leaves) with ROOT OUT BUILD PREFIX DEBS TMP DEADLINE PART_BUDGET
# in the environment.
names=() budgets=() cmds=()
part() { names+=("$1"); budgets+=("$2"); cmds+=("${3#$'\n'}"); }

define_build() {
  part deps 30 '
need=(yaml-cpp/yaml.h fmt/format.h catch2/catch.hpp CLI/CLI.hpp nlohmann/json.hpp x86_64-linux-gnu/openblas-openmp/cblas.h)
missing=(); for h in "${need[@]}"; do [[ -e /usr/include/$h || -e /usr/local/include/$h ]] || missing+=("$h"); done
if [[ ${#missing[@]} == 0 && ${RELPOS_DEPS:-} != carried ]]; then echo "system has every dependency"; rm -f "$PREFIX/.relpos-debs"; exit 0; fi
echo "missing on this machine: ${missing[*]:-none (RELPOS_DEPS=carried)}"
python3 scripts/gpu_check.py unpack-debs "$DEBS" "$PREFIX"'
  part configure 60 '
deps=(); [[ -f $PREFIX/.relpos-debs ]] && { mapfile -t deps < <(python3 scripts/gpu_check.py cmake-args "$PREFIX") || exit 1; }
echo "dependencies from: ${deps:+$PREFIX (carried)}${deps:-the system}"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DRELPOS_CUDA=ON -DRELPOS_NATIVE=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 "${deps[@]}" > "$OUT/build-detail.log" 2>&1 || { tail -25 "$OUT/build-detail.log"; exit 1; }
grep -E "relpos BLAS|CUDA" "$OUT/build-detail.log" | head -5'
  part compile 330 '
cmake --build "$BUILD" -j "$(nproc)" --target relpos relpos_cuda_tests relpos_bench_train >> "$OUT/build-detail.log" 2>&1 \
  || { grep -m 20 -E "error|Error" "$OUT/build-detail.log"; exit 1; }
"$BUILD/relpos" info | grep -E "^(relpos|CUDA|BLAS:)"'
}

define_check() {
  part machine 20 '
[[ -x $BUILD/relpos && -x $BUILD/relpos_cuda_tests ]] || { echo "no $BUILD/relpos or $BUILD/relpos_cuda_tests: run scripts/gpu-check.sh build first"; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader 2>&1 | head -4
nvcc --version | tail -1
"$BUILD/relpos" info | grep -A4 "^CUDA"'
  part ctest 120 '
cd "$BUILD" && RELPOS_REQUIRE_CUDA=1 ctest -L cuda --no-tests=error --output-on-failure > "$OUT/ctest.txt" 2>&1
rc=$?; grep -E "tests passed|tests failed|RELPOS_REQUIRE_CUDA|FAILED|Total Test" "$OUT/ctest.txt" | head -8; exit $rc'
  part curve 90 '
# quickstart, same seed, float32, TF32 off: CPU and CUDA side by side, loss every 5 steps
common=(--overwrite --set train.steps=60 --set train.log_every=5 --set train.eval_every=60 --set train.checkpoint_every=60)
"$BUILD/relpos" train configs/quickstart.yaml "${common[@]}" --set output.dir="$TMP/qs-cpu" --set train.device=cpu > "$TMP/qs-cpu.txt" 2>&1 & cpu=$!
"$BUILD/relpos" train configs/quickstart.yaml "${common[@]}" --set output.dir="$TMP/qs-cuda" --set train.device=cuda > "$TMP/qs-cuda.txt" 2>&1; rc=$?
wait $cpu; rc_cpu=$?
{ echo "== cpu (exit $rc_cpu)"; cat "$TMP/qs-cpu.txt"; echo "== cuda (exit $rc)"; cat "$TMP/qs-cuda.txt"; } > "$OUT/curve.txt"
[[ $rc == 0 && $rc_cpu == 0 ]] || { tail -3 "$TMP/qs-cuda.txt" "$TMP/qs-cpu.txt"; exit 1; }
python3 scripts/gpu_check.py curve "$TMP/qs-cpu/metrics.jsonl" "$TMP/qs-cuda/metrics.jsonl" | tee -a "$OUT/curve.txt" | tail -1
ok=${PIPESTATUS[0]}
# the CUDA-trained checkpoint evaluates on the CPU
"$BUILD/relpos" eval "$TMP/qs-cuda" >> "$OUT/curve.txt" 2>&1 && echo "cuda checkpoint evaluates on the cpu" || ok=1
exit $ok'
  part configs 150 '
# every config 5 steps on cuda, 3 at a time on the one GPU; one log per config, joined in order
# (the runs stop 15 s before the part timeout, so the per-config lines below always print)
ls configs/*.yaml | timeout $((PART_BUDGET - 15)) xargs -P 3 -I{} bash -c '"'"'n=$(basename {} .yaml)
  timeout 60 "$BUILD/relpos" train {} --overwrite --set train.steps=5 --set train.log_every=1 --set train.eval_every=5 \
    --set train.eval_batches=2 --set train.checkpoint_every=0 --set train.device=cuda --set output.dir="$TMP/cfg-$n" \
    > "$TMP/cfg-$n.txt" 2>&1; echo $? > "$TMP/cfg-$n.rc"'"'"'
fail=0; : > "$OUT/configs.txt"
for c in configs/*.yaml; do n=$(basename "$c" .yaml); rc=$(cat "$TMP/cfg-$n.rc" 2>/dev/null || echo "not run")
  { echo "== $n (exit $rc)"; cat "$TMP/cfg-$n.txt" 2>/dev/null; } >> "$OUT/configs.txt"
  if [[ $rc == 0 ]]; then echo "ok   $n $(grep -o "loss [0-9.]*" "$TMP/cfg-$n.txt" | tail -1)"
  else echo "FAIL $n (exit $rc): $(tail -2 "$TMP/cfg-$n.txt" 2>/dev/null | tr "\n" " ")"; fail=1; fi
done; exit $fail'
  part bench rest '
# relpos vs PyTorch CUDA eager, tokens/s, while the phase has time left (each run <= 60 s)
: > "$OUT/bench.jsonl"
sizes=("tiny:--d-model 128 --layers 2 --heads 4 --seq 128 --batch 16 --warmup 5 --steps 20"
       "small:--d-model 256 --layers 4 --heads 8 --seq 256 --batch 8 --warmup 5 --steps 20"
       "medium:--d-model 512 --layers 8 --heads 8 --seq 1024 --batch 4 --warmup 3 --steps 10")
for s in "${sizes[@]}"; do name=${s%%:*}; args=${s#*:}
  for pos in none t5 rope; do
    for impl in relpos torch; do
      left=$((DEADLINE - $(date +%s))); (( left >= 20 )) || { echo "time is up before $name $pos $impl"; break 3; }
      cmd=("$BUILD/relpos_bench_train"); [[ $impl == torch ]] && cmd=(python3 bench/torch_train.py)
      timeout $((left < 60 ? left : 60)) "${cmd[@]}" $args --pos $pos --device cuda 2>> "$TMP/bench.err" \
        | sed "s/^{/{\"size\":\"$name\",/" >> "$OUT/bench.jsonl" || { echo "$impl $name $pos failed: $(tail -1 "$TMP/bench.err")"; bad=1; }
    done
  done
done
python3 scripts/gpu_check.py bench-table "$OUT/bench.jsonl"; exit ${bad:-0}'
}

run_phase() {  # $1: phase
  names=() budgets=() cmds=()
  "define_$1"
  local fixed=0 i
  for i in "${!names[@]}"; do [[ ${budgets[$i]} != rest ]] && fixed=$((fixed + budgets[i])); done
  if [[ $dry == 1 ]]; then
    echo "#### phase $1 (cap $CAP s; OUT=$OUT BUILD=$BUILD PREFIX=$PREFIX; TMP: a fresh mktemp -d, removed at exit)"
    for i in "${!names[@]}"; do
      local b="${budgets[$i]} s"
      [[ ${budgets[$i]} == rest ]] && b="the rest of the cap: at least $((CAP - fixed)) s (all of it when the parts above finish early)"
      echo "== part ${names[$i]}: timeout $b"
      sed 's/^/    /' <<< "${cmds[$i]}"
    done
    local rest=0; [[ " ${budgets[*]} " == *" rest "* ]] && rest=$((CAP - fixed))
    echo "#### phase $1: budgets sum to $((fixed + rest)) s (cap $CAP s = $((CAP / 60)) min $((CAP % 60)) s)"
    echo
    return 0
  fi
  mkdir -p "$OUT"
  export TMP; TMP=$(mktemp -d /tmp/relpos-gpu-check.XXXXXX)
  trap 'rm -rf "$TMP"' EXIT
  local t0 summary=() failed=0
  t0=$(date +%s)
  export DEADLINE=$((t0 + CAP))
  for i in "${!names[@]}"; do
    local n=${names[$i]} b=${budgets[$i]} s rc dt verdict
    [[ $b == rest ]] && b=$((DEADLINE - $(date +%s)))
    echo; echo "== $n (timeout $b s, $(date +%T))"
    if (( b < 20 )); then summary+=("SKIP $n: no time left in the phase cap"); echo "${summary[-1]}"; continue; fi
    s=$(date +%s)
    PART_BUDGET=$b timeout -k 5 "$b" bash -o pipefail -c "${cmds[$i]}"; rc=$?
    dt=$(($(date +%s) - s))
    if [[ $rc == 0 ]]; then verdict="PASS $n ($dt s)"
    elif [[ $rc == 124 || $rc == 137 ]]; then verdict="FAIL $n ($dt s): timed out after $b s"
    else verdict="FAIL $n ($dt s): exit $rc"; fi
    [[ $rc != 0 && $n != bench ]] && failed=1
    [[ $rc != 0 && $n == bench ]] && verdict+=" (reported only)"
    summary+=("$verdict"); echo "$verdict"
    # nothing after a failed build can run
    [[ $1 == build && $rc != 0 ]] && break
  done
  echo; echo "== summary of phase $1 ($(($(date +%s) - t0)) s of $CAP s)"
  printf '%s\n' "${summary[@]}"
  echo "phase $1: $([[ $failed == 0 ]] && echo PASS || echo FAIL)"
  return $failed
}

if [[ $phase == deps-configure ]]; then
  # The carried .deb files alone suffice: unpack them into a scratch prefix, configure
  # (CUDA on, like the GPU machine) against it, check every dependency resolved there.
  scratch=$(mktemp -d /tmp/relpos-deps.XXXXXX) sb=${SCRATCH_BUILD:-/tmp/scratch-build}
  if [[ $dry == 1 ]]; then
    echo "python3 scripts/gpu_check.py unpack-debs $DEBS $scratch"
    echo "cmake -S . -B $sb -DCMAKE_BUILD_TYPE=Release -DRELPOS_CUDA=ON -DRELPOS_NATIVE=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \$(python3 scripts/gpu_check.py cmake-args $scratch)"
    echo "python3 scripts/gpu_check.py verify-cache $sb/CMakeCache.txt $scratch"
    rmdir "$scratch"; exit 0
  fi
  trap 'rm -rf "$scratch" "$sb"' EXIT
  rm -rf "$sb"
  python3 scripts/gpu_check.py unpack-debs "$DEBS" "$scratch" || exit 1
  mapfile -t deps < <(python3 scripts/gpu_check.py cmake-args "$scratch") || exit 1
  printf '  %s\n' "${deps[@]}"
  cmake -S . -B "$sb" -DCMAKE_BUILD_TYPE=Release -DRELPOS_CUDA=ON -DRELPOS_NATIVE=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
    "${deps[@]}" > "$sb.log" 2>&1 || { tail -30 "$sb.log"; echo "FAIL configure against the carried packages"; exit 1; }
  grep -E "relpos BLAS|Configuring done|Generating done" "$sb.log"; rm -f "$sb.log"
  python3 scripts/gpu_check.py verify-cache "$sb/CMakeCache.txt" "$scratch" || exit 1
  echo "PASS configure against only the carried packages ($(du -sh "$DEBS" | cut -f1) of .deb files)"
  exit 0
fi

if [[ $dry == 1 ]]; then
  for p in ${phase:-build check}; do run_phase "$p"; done
  exit 0
fi
mkdir -p "$OUT"
exec > >(tee "$OUT/$phase.log") 2>&1
run_phase "$phase"
