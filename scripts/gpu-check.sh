#!/usr/bin/env bash
# scripts/gpu-check.sh — the GPU verification: one command for a GPU machine (docs/backends.md,
# "GPU verification", has the plan of the first slot and what to do for each failure).
#
#   scripts/gpu-check.sh all          facts, build, CUDA tests, triage, curve, configs, bench:
#                                     every part with its own timeout, at most 540 s in all
#   scripts/gpu-check.sh build        facts + build only         (for a second call)
#   scripts/gpu-check.sh check        the parts after the build  (for a second call)
#   scripts/gpu-check.sh VERB --only PART[,PART...]   only the named parts of VERB
#   scripts/gpu-check.sh VERB --dry-run     print each part's commands and timeout, run nothing
#   scripts/gpu-check.sh all --rehearse     the same script on a machine without a GPU (CI runs
#                                     it): the same build configuration (warnings as errors),
#                                     against only the carried packages; the CUDA-only parts
#                                     must fail for want of a GPU, every other part must pass
#   scripts/gpu-check.sh deps-configure     configure against only the carried packages (scratch)
#
# Each part prints one line "PASS|FAIL|SKIP part (N s): ..."; PASS only when the part ran and
# exited 0. The run ends with a summary and "gpu-check: PASS" only when every part passed
# (triage: skipped because the CUDA tests passed; bench: reported only). Exit 1 otherwise.
# Output: ${OUT:-gpu-check-out}/, 7 files: gpu-check.log (this transcript; `all` rewrites it,
# `build` / `check` append), build-detail.log, cuda-tests.txt, triage.txt, curve.txt,
# configs.txt, bench.jsonl. Rerunnable: the build resumes incrementally, training runs go to a
# temporary folder removed at exit.
# Environment: OUT, RELPOS_GPU_BUILD (build folder, default build-gpu), RELPOS_DEPS=carried
# (use .gpu-debs even where the system has the headers), RELPOS_REHEARSE_SCALE (rehearsal: the
# factor on every budget, default 4), RELPOS_REHEARSE_COMPILE_S (rehearsal compile, default 2400).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }

verbs=() dry=0 rehearse=0 only=""
while (($#)); do
  case $1 in
    all | build | check | deps-configure) [[ " ${verbs[*]} " == *" $1 "* ]] || verbs+=("$1") ;;
    --dry-run) dry=1 ;;
    --rehearse) rehearse=1 ;;
    --only) [[ $# -ge 2 ]] || { echo "gpu-check: --only needs a list of parts" >&2; exit 2; }; only=$2; shift ;;
    --only=*) only=${1#--only=} ;;
    -h | --help) usage ;;
    *) echo "gpu-check: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
((${#verbs[@]})) || usage
if ((${#verbs[@]} > 1)) && [[ " ${verbs[*]} " == *" all "* || " ${verbs[*]} " == *" deps-configure "* ]]; then
  echo "gpu-check: '${verbs[*]}': 'all' and 'deps-configure' stand alone ('build check' is 'all' without the facts twice)" >&2
  exit 2
fi

export ROOT REHEARSE=$rehearse
OUT=${OUT:-gpu-check-out}; [[ $OUT == /* ]] || OUT=$ROOT/$OUT
BUILD=${RELPOS_GPU_BUILD:-build-gpu}; [[ $BUILD == /* ]] || BUILD=$ROOT/$BUILD
export OUT BUILD PREFIX=${RELPOS_DEPS_PREFIX:-$ROOT/.gpu-deps} DEBS=${RELPOS_GPU_DEBS:-$ROOT/.gpu-debs}
# The binaries the check runs, where the build puts them (cli/, bench/ and tests/CMakeLists.txt).
export RELPOS_BIN=$BUILD/relpos CUDA_TESTS=$BUILD/tests/relpos_cuda_tests BENCH_BIN=$BUILD/relpos_bench_train
[[ -d /usr/local/cuda/bin && ":$PATH:" != *":/usr/local/cuda/bin:"* ]] && export PATH=$PATH:/usr/local/cuda/bin
CAP=540  # seconds for `all`: 9 minutes of a 10-minute command, the machine's start on top
OUT_FILES="gpu-check.log build-detail.log cuda-tests.txt triage.txt curve.txt configs.txt bench.jsonl"
# The rehearsal (2 shared cores, no GPU): the device runs happen on the CPU, budgets scale.
SCALE=1 DEV=cuda
if ((rehearse)); then SCALE=${RELPOS_REHEARSE_SCALE:-4} DEV=cpu; fi
export SCALE DEV

# ------------------------------------------------------------------ the parts
# part NAME BUDGET_S KIND COMMANDS. KIND: build (the build chain: a failure stops the run),
# gpu (needs a GPU: without one it must fail through no_gpu; the rehearsal checks that it
# does), cpu (runs the same everywhere, on the GPU where there is one), after-fail (triage:
# runs only when cuda-tests failed), report (bench: reported, never fails the run).
# COMMANDS run as `bash -o pipefail -c` under `timeout BUDGET` ("rest": what the cap leaves)
# with ROOT OUT BUILD PREFIX DEBS TMP DEV REHEARSE PART_END (epoch seconds) in the environment.
names=() budgets=() kinds=() cmds=()
part() { names+=("$1"); budgets+=("$2"); kinds+=("$3"); cmds+=("${4#$'\n'}"); }

# The helpers the parts call (exported functions).
no_gpu() {  # the part fails because no GPU is usable; the rehearsal expects exactly this
  echo "no GPU: $*"; : > "$TMP/no-gpu.$PART_NAME"; exit 1
}
left() { echo $((PART_END - $(date +%s))); }
export -f no_gpu left

define_facts() {
  part facts 10 cpu '
have() { command -v "$1" > /dev/null; }
echo "host:    $(uname -srm); $(nproc) cores; $(awk "/MemTotal/ {printf \"%.0f GiB\", \$2 / 1048576}" /proc/meminfo); $(df -h "$ROOT" | awk "NR == 2 {print \$4}") free on $ROOT"
if have nvidia-smi; then
  timeout 8 nvidia-smi --query-gpu=index,name,memory.total,driver_version,compute_cap --format=csv,noheader 2>&1 | sed "s/^/gpu:     /" | head -8
else echo "gpu:     no nvidia-smi on PATH"; fi
missing=()
for t in nvcc cmake c++ python3; do have $t || missing+=($t); done
have nvcc && echo "nvcc:    $(nvcc --version | tail -2 | head -1)"
have cmake && echo "cmake:   $(cmake --version | head -1)"
have c++ && echo "c++:     $(c++ --version | head -1)"
if have ninja; then echo "ninja:   $(ninja --version) (the build uses it)"; elif have make; then echo "make:    $(make --version | head -1) (no ninja)"; else missing+=(ninja-or-make); fi
have ccache && echo "ccache:  $(ccache --version | head -1)"
echo "python3: $(python3 --version 2>&1); torch: $(for p in /usr/bin/python3 python3; do $p -c "import torch; print(torch.__version__, torch.version.cuda)" 2>/dev/null && break; done || echo none)"
s=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null); echo "compute-sanitizer: ${s:-not found}"
((${#missing[@]} == 0)) || { echo "missing, the build cannot run: ${missing[*]}"; exit 1; }'
}

define_build() {
  part deps 15 build '
need=(yaml-cpp/yaml.h fmt/format.h catch2/catch.hpp CLI/CLI.hpp nlohmann/json.hpp x86_64-linux-gnu/openblas-openmp/cblas.h)
missing=(); for h in "${need[@]}"; do [[ -e /usr/include/$h || -e /usr/local/include/$h ]] || missing+=("$h"); done
carried=${RELPOS_DEPS:-}; ((REHEARSE)) && carried=carried
if [[ ${#missing[@]} == 0 && $carried != carried ]]; then echo "the system has every dependency"; rm -f "$PREFIX/.relpos-debs"; exit 0; fi
echo "the carried packages: ${missing[*]:-(RELPOS_DEPS=carried or the rehearsal)}"
python3 scripts/gpu_check.py unpack-debs "$DEBS" "$PREFIX"'
  part configure 35 build '
deps=(); [[ -f $PREFIX/.relpos-debs ]] && { mapfile -t deps < <(python3 scripts/gpu_check.py cmake-args "$PREFIX") && ((${#deps[@]})) || exit 1; }
gen=(); [[ ! -f $BUILD/CMakeCache.txt ]] && command -v ninja > /dev/null && gen=(-G Ninja)
launch=(); command -v ccache > /dev/null && launch=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
strict=(); ((REHEARSE)) && strict=(-DRELPOS_WERROR=ON)
from="the system"; ((${#deps[@]})) && from="$PREFIX (carried)"
echo "dependencies from: $from; ${gen[*]:-the generator of $BUILD}${launch:+; ccache}${strict:+; warnings as errors}"
cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DRELPOS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DRELPOS_NATIVE=OFF -DRELPOS_DNNL=OFF -DRELPOS_MPI=OFF "${strict[@]}" "${launch[@]}" "${deps[@]}" > "$OUT/build-detail.log" 2>&1 \
  || { tail -25 "$OUT/build-detail.log"; exit 1; }
grep -E "relpos (BLAS|oneDNN)|CUDA compiler" "$OUT/build-detail.log" | head -4
if ((${#deps[@]})); then python3 scripts/gpu_check.py verify-cache "$BUILD/CMakeCache.txt" "$PREFIX" | tail -2 || exit 1; fi'
  part compile 220 build '
echo "cmake --build, $(nproc) jobs: relpos relpos_cuda_tests relpos_bench_train"
# ccache (where configure found it) keyed on paths relative to the tree: a fresh clone elsewhere
# reuses what an earlier run compiled
export CCACHE_BASEDIR=$ROOT
cmake --build "$BUILD" -j "$(nproc)" --target relpos relpos_cuda_tests relpos_bench_train >> "$OUT/build-detail.log" 2>&1 \
  || { grep -m 20 -E "error|Error|warning" "$OUT/build-detail.log"; exit 1; }
n=$(grep -c "warning:" "$OUT/build-detail.log"); ((n == 0)) || echo "$n compiler warnings (build-detail.log)"
((REHEARSE && n > 0)) && { grep -m 10 "warning:" "$OUT/build-detail.log"; exit 1; }  # (nvcc has no -Werror here)
# the check runs exactly these paths
for b in "$RELPOS_BIN" "$CUDA_TESTS" "$BENCH_BIN"; do [[ -x $b ]] || { echo "built, but no $b"; exit 1; }; done
"$RELPOS_BIN" --version | head -1'
}

define_check() {
  part device 10 gpu '
[[ -x $RELPOS_BIN ]] || { echo "no $RELPOS_BIN: run the build first"; exit 1; }
gpus=$(timeout 8 nvidia-smi -L 2>&1); smi=$?
"$RELPOS_BIN" info > "$TMP/info.txt" 2>&1; rc=$?
grep -E "^(relpos|build type|BLAS:|CUDA)|^  cuda:" "$TMP/info.txt"
((rc == 0)) || { tail -3 "$TMP/info.txt"; echo "relpos info: exit $rc"; exit 1; }
((smi == 0)) && [[ $gpus == *GPU* ]] || no_gpu "nvidia-smi -L: $(head -1 <<< "$gpus")"
grep -qE "^CUDA devices: [1-9]" "$TMP/info.txt" || no_gpu "relpos info lists no CUDA device"
grep -qE "cuBLAS [0-9]+\.[0-9]+" "$TMP/info.txt" || { echo "cuBLAS does not load"; exit 1; }'
  part cuda-tests 100 gpu '
# Every Catch2 case in a process of its own (a fault or a timeout names its case, a sticky CUDA
# error cannot fail later cases), output appended to cuda-tests.txt as each case runs.
out=$OUT/cuda-tests.txt; : > "$out"
[[ -x $CUDA_TESTS ]] || { echo "no $CUDA_TESTS: run the build first"; exit 1; }
mapfile -t cases < <("$CUDA_TESTS" --list-test-names-only 2> "$TMP/list.err" | grep -v "^$")
((${#cases[@]})) || { echo "$CUDA_TESTS lists no test case: $(head -c 300 "$TMP/list.err")"; exit 1; }
echo "${#cases[@]} cases, one process each (RELPOS_REQUIRE_CUDA=1; 60 s at most per case)"
passed=0 i=0
for name in "${cases[@]}"; do
  i=$((i + 1)) t=$(($(left) - 2)); ((t > 60)) && t=60
  ((t >= 5)) || { echo "FAIL: time is up before case $i of ${#cases[@]}: $name" | tee -a "$out"; break; }
  spec=$(sed "s/[],[*\\\\]/\\\\&/g" <<< "$name")  # Catch2 test spec: escape , [ ] * \
  echo "== [$i/${#cases[@]}] $(date +%T) start: $name" >> "$out"
  s=$(date +%s)
  RELPOS_REQUIRE_CUDA=1 timeout -k 2 "$t" "$CUDA_TESTS" "$spec" -w NoTests --durations yes > "$TMP/case.txt" 2>&1; rc=$?
  cat "$TMP/case.txt" >> "$out"
  case $rc in
    0) v=ok; passed=$((passed + 1)) ;;
    124 | 137) v="TIMEOUT after $t s" ;;
    77) v="exit 77: a skip, with RELPOS_REQUIRE_CUDA=1 set" ;;
    *) if ((rc > 128)); then v="killed by signal $((rc - 128))"; else v="failed (exit $rc)"; fi ;;
  esac
  echo "== [$i/${#cases[@]}] end ($(($(date +%s) - s)) s): $name: $v" >> "$out"
  [[ $v == ok ]] && continue
  if ((i == 1)) && grep -q "no CUDA device is usable" "$TMP/case.txt"; then no_gpu "$(grep -m1 "no CUDA device" "$TMP/case.txt")"; fi
  echo "FAIL case $i: $name: $v: $(grep -m1 -E "FAILED|error|Error" "$TMP/case.txt" | cut -c1-200)"
done
echo "$passed of ${#cases[@]} cases passed (cuda-tests.txt)"
((passed == ${#cases[@]}))'
  part triage 45 after-fail '
# The first failing case again: under RELPOS_CUDA_SYNC=1 (every launch waits: the failing
# kernel names itself), then under compute-sanitizer memcheck.
# The case: the first "end" line of cuda-tests.txt that is not ok, else the case it started
# last and never ended (the part was cut off there); so `check --only triage` works later too.
out=$OUT/triage.txt; : > "$out"
log=$OUT/cuda-tests.txt
name=$(sed -nE "s/^== \[[0-9]+\/[0-9]+\] end \([0-9]+ s\): (.*): (failed \(exit [0-9]+\)|TIMEOUT after [0-9]+ s|killed by signal [0-9]+|exit 77: .*)\$/\1/p" "$log" 2> /dev/null | head -1)
last=$(grep -E "^== \[[0-9]+/[0-9]+\] (start|end)" "$log" 2> /dev/null | tail -1)
[[ -z $name && $last == *"] "??:??:??" start: "* ]] && name=${last#*start: }
[[ -n $name ]] || { echo "no failing case in $log to rerun"; exit 1; }
spec=$(sed "s/[],[*\\\\]/\\\\&/g" <<< "$name")
echo "case: $name" | tee -a "$out"
RELPOS_CUDA_SYNC=1 RELPOS_REQUIRE_CUDA=1 timeout -k 2 20 "$CUDA_TESTS" "$spec" -w NoTests > "$TMP/sync.txt" 2>&1; rc=$?
{ echo "== RELPOS_CUDA_SYNC=1 (exit $rc)"; cat "$TMP/sync.txt"; } >> "$out"
echo "RELPOS_CUDA_SYNC=1: exit $rc; $(grep -m1 -iE "CUDA error|error|FAILED" "$TMP/sync.txt" | cut -c1-200)"
grep -q "no CUDA device is usable" "$TMP/sync.txt" && no_gpu "$(grep -m1 "no CUDA device" "$TMP/sync.txt")"
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null)
[[ -n $cs ]] || { echo "compute-sanitizer: not found"; exit 1; }
t=$(($(left) - 2)); ((t >= 5)) || { echo "compute-sanitizer: no time left"; exit 1; }
RELPOS_REQUIRE_CUDA=1 timeout -k 2 "$t" "$cs" --tool memcheck --error-exitcode 99 "$CUDA_TESTS" "$spec" -w NoTests > "$TMP/cs.txt" 2>&1; rc=$?
{ echo "== compute-sanitizer --tool memcheck (timeout $t s; exit $rc)"; cat "$TMP/cs.txt"; } >> "$out"
echo "compute-sanitizer: exit $rc; $(grep -m1 -E "Invalid|out of bounds" "$TMP/cs.txt" | cut -c1-200) $(grep -m1 "ERROR SUMMARY" "$TMP/cs.txt")"
((rc != 124 && rc != 137))'
  part curve 45 cpu '
# quickstart, same seed, float32: the CPU and $DEV side by side, the loss at every 5th step.
((REHEARSE)) && export OMP_NUM_THREADS=1  # (two runs side by side on the CPU: no oversubscription)
common=(--overwrite --set train.steps=60 --set train.log_every=5 --set train.eval_every=60 --set train.checkpoint_every=60)
: > "$OUT/curve.txt"
[[ -x $RELPOS_BIN ]] || { echo "no $RELPOS_BIN: run the build first"; exit 1; }
"$RELPOS_BIN" train configs/quickstart.yaml "${common[@]}" --set output.dir="$TMP/qs-cpu" --set train.device=cpu > "$TMP/qs-cpu.txt" 2>&1 & cpu=$!
"$RELPOS_BIN" train configs/quickstart.yaml "${common[@]}" --set output.dir="$TMP/qs-dev" --set train.device=$DEV > "$TMP/qs-dev.txt" 2>&1; rc=$?
wait $cpu; rc_cpu=$?
{ echo "== cpu (exit $rc_cpu)"; cat "$TMP/qs-cpu.txt"; echo "== $DEV (exit $rc)"; cat "$TMP/qs-dev.txt"; } >> "$OUT/curve.txt"
((rc_cpu == 0)) || { echo "cpu run: exit $rc_cpu: $(tail -1 "$TMP/qs-cpu.txt")"; exit 1; }
((rc == 0)) || { echo "$DEV run: exit $rc: $(tail -1 "$TMP/qs-dev.txt")"; exit 1; }
python3 scripts/gpu_check.py curve "$TMP/qs-cpu/metrics.jsonl" "$TMP/qs-dev/metrics.jsonl" $DEV >> "$OUT/curve.txt" 2>&1; ok=$?
tail -1 "$OUT/curve.txt"
# the checkpoint trained on $DEV evaluates on the CPU
"$RELPOS_BIN" eval "$TMP/qs-dev" >> "$OUT/curve.txt" 2>&1 && echo "the $DEV checkpoint evaluates on the cpu" || { echo "relpos eval of the $DEV checkpoint failed"; ok=1; }
exit $ok'
  part configs 45 cpu '
# every config 3 steps on $DEV (warmup 1: it must stay below train.steps), a few at a time; one
# log per config, joined in order (the runs stop 8 s before the part ends)
[[ -x $RELPOS_BIN ]] || { echo "no $RELPOS_BIN: run the build first"; exit 1; }
P=3; ((REHEARSE)) && P=2 && export OMP_NUM_THREADS=1
per=$((30 * SCALE))
export per
ls configs/*.yaml | timeout $(($(left) - 8)) xargs -P $P -I{} bash -c '"'"'n=$(basename {} .yaml)
  timeout $per "$RELPOS_BIN" train {} --overwrite --set train.steps=3 --set optim.warmup=1 --set train.log_every=1 \
    --set train.eval_every=3 --set train.eval_batches=1 --set train.checkpoint_every=0 --set train.device=$DEV \
    --set output.dir="$TMP/cfg-$n" > "$TMP/cfg-$n.txt" 2>&1; echo $? > "$TMP/cfg-$n.rc"'"'"'
fail=0 ok=0 all=0; : > "$OUT/configs.txt"
for c in configs/*.yaml; do n=$(basename "$c" .yaml) all=$((all + 1)); rc=$(cat "$TMP/cfg-$n.rc" 2> /dev/null || echo "not run")
  { echo "== $n (exit $rc)"; cat "$TMP/cfg-$n.txt" 2> /dev/null; } >> "$OUT/configs.txt"
  if [[ $rc == 0 ]]; then ok=$((ok + 1))
  else echo "FAIL $n (exit $rc): $(tail -2 "$TMP/cfg-$n.txt" 2> /dev/null | tr "\n" " " | cut -c1-240)"; fail=1; fi
done
echo "$ok of $all configs trained 3 steps on $DEV (configs.txt)"; exit $fail'
  part bench rest report '
# one size, relpos vs PyTorch eager on $DEV, tokens/s, while time is left (each run <= 45 s)
: > "$OUT/bench.jsonl"; bad=0
[[ -x $BENCH_BIN ]] || { echo "no $BENCH_BIN: run the build first"; exit 1; }
py=; for p in /usr/bin/python3 python3; do $p -c "import torch" 2> /dev/null && py=$p && break; done
size=small args="--d-model 256 --layers 4 --heads 8 --seq 256 --batch 8 --warmup 5 --steps 20"
((REHEARSE)) && size=tiny args="--d-model 64 --layers 2 --heads 4 --seq 64 --batch 4 --warmup 1 --steps 3"
for pos in none rope; do
  for impl in relpos torch; do
    t=$(($(left) - 2)); ((t >= 10)) || { echo "time is up before $size $pos $impl"; break 2; }
    ((t > 45)) && t=45
    cmd=("$BENCH_BIN"); [[ $impl == torch ]] && { [[ -n $py ]] || { echo "torch: no python3 imports it"; bad=1; continue; }; cmd=($py bench/torch_train.py); }
    timeout $t "${cmd[@]}" $args --pos $pos --device $DEV 2>> "$TMP/bench.err" | grep "^{" \
      | sed "s/^{/{\"size\":\"$size\",/" >> "$OUT/bench.jsonl" || { echo "$impl $size $pos failed: $(tail -1 "$TMP/bench.err")"; bad=1; }
  done
done
python3 scripts/gpu_check.py bench-table "$OUT/bench.jsonl" || bad=1
exit $bad'
}

# ------------------------------------------------------------------ running them
define_verb() {  # the parts of a verb
  names=() budgets=() kinds=() cmds=()
  case $1 in
    all) define_facts; define_build; define_check ;;
    build) define_facts; define_build ;;
    check) define_check ;;
  esac
  if [[ -n $only ]]; then
    local keep=() i p
    for p in ${only//,/ }; do [[ " ${names[*]} " == *" $p "* ]] || { echo "gpu-check: --only: no part '$p' in '$1' (parts: ${names[*]})" >&2; exit 2; }; done
    for i in "${!names[@]}"; do [[ ",$only," == *",${names[$i]},"* ]] && keep+=("$i"); done
    local n=() b=() k=() c=()
    for i in "${keep[@]}"; do n+=("${names[$i]}") b+=("${budgets[$i]}") k+=("${kinds[$i]}") c+=("${cmds[$i]}"); done
    names=("${n[@]}") budgets=("${b[@]}") kinds=("${k[@]}") cmds=("${c[@]}")
  fi
}

budget_of() {  # $1 index: the part's timeout in this mode (the GPU's, or the rehearsal's)
  local b=${budgets[$1]}
  [[ $b == rest ]] || ((!rehearse)) && { echo "$b"; return; }
  if [[ ${names[$1]} == compile ]]; then echo "${RELPOS_REHEARSE_COMPILE_S:-2400}"; else echo $((b * SCALE)); fi
}

plan() {  # $1 verb: print the parts, their commands and timeouts; the sum
  define_verb "$1"
  local fixed=0 i b rest
  for i in "${!names[@]}"; do [[ ${budgets[$i]} != rest ]] && fixed=$((fixed + $(budget_of "$i"))); done
  local cap=$CAP; ((rehearse)) && cap=$((fixed + 60))
  echo "#### $1$( ((rehearse)) && echo " --rehearse") (cap $cap s; OUT=$OUT BUILD=$BUILD; TMP: a fresh mktemp -d, removed at exit)"
  for i in "${!names[@]}"; do
    b=$(budget_of "$i")
    if [[ $b == rest ]]; then b="the rest of the cap: at least $((cap - fixed)) s"; else b="$b s"; fi
    echo "== part ${names[$i]} (${kinds[$i]}): timeout $b"
    sed 's/^/    /' <<< "${cmds[$i]}"
  done
  rest=0; [[ " ${budgets[*]} " == *" rest "* ]] && rest=$((cap - fixed))
  echo "#### $1: budgets sum to $((fixed + rest)) s (cap $cap s)"
}

run_verb() {  # $1 verb; returns 1 when the verb failed (or, rehearsing, missed an expectation)
  define_verb "$1"
  local fixed=0 i
  for i in "${!names[@]}"; do [[ ${budgets[$i]} != rest ]] && fixed=$((fixed + $(budget_of "$i"))); done
  local cap=$CAP; ((rehearse)) && cap=$((fixed + 60))
  local t0 summary=() bad=0 stop="" cuda_tests=none
  t0=$(date +%s)
  local deadline=$((t0 + cap))
  echo "#### scripts/gpu-check.sh $1$( ((rehearse)) && echo " --rehearse") ($(date -u +%FT%TZ); cap $cap s; OUT=$OUT)"
  for i in "${!names[@]}"; do
    local n=${names[$i]} k=${kinds[$i]} b s rc dt verdict expect=pass
    b=$(budget_of "$i"); [[ $b == rest ]] && b=$((deadline - $(date +%s)))
    ((rehearse)) && [[ $k == gpu || $k == after-fail ]] && expect=no-gpu
    echo; echo "== $n (timeout $b s, $(date +%T))"
    if [[ -n $stop ]]; then verdict="SKIP $n: not run: $stop"
    elif [[ $k == after-fail && $cuda_tests == pass ]]; then verdict="SKIP $n: not needed: cuda-tests passed"
    elif [[ $k == after-fail && $cuda_tests == none && " ${names[*]} " == *" cuda-tests "* ]]; then
      verdict="SKIP $n: not run: cuda-tests did not run"
    elif [[ ${budgets[$i]} == rest ]] && ((b < 20)); then verdict="SKIP $n: not run: ${b} s left of the ${cap} s cap"
    else
      s=$(date +%s)
      rm -f "$TMP/no-gpu.$n"
      PART_NAME=$n PART_END=$((s + b)) timeout -k 5 "$b" bash -o pipefail -c "${cmds[$i]}"; rc=$?
      dt=$(($(date +%s) - s))
      if ((rc == 0)); then verdict="PASS $n ($dt s)"
      elif ((rc == 124 || rc == 137)); then verdict="FAIL $n ($dt s): timed out after $b s"
      elif [[ -f $TMP/no-gpu.$n ]]; then verdict="FAIL $n ($dt s): no GPU"
      else verdict="FAIL $n ($dt s): exit $rc"; fi
      [[ $n == cuda-tests ]] && cuda_tests=$( ((rc == 0)) && echo pass || { [[ -f $TMP/no-gpu.$n ]] && echo no-gpu || echo fail; })
      [[ $k == build && $rc != 0 ]] && stop="$n failed"
    fi
    # the verdict of the run: every part passed (triage skipped as not needed, bench reported
    # only); rehearsing: the GPU parts failed for want of a GPU and every other part passed
    local ok=0
    if [[ $expect == no-gpu ]]; then [[ $verdict == "FAIL $n ("*"): no GPU" ]] && ok=1
    elif [[ $verdict == "PASS $n "* || $verdict == "SKIP $n: not needed: "* ]]; then ok=1
    elif [[ $k == report ]] && ((!rehearse)); then ok=1 verdict+=" (reported only)"
    fi
    ((ok)) || bad=1
    if ((rehearse)); then
      if [[ $expect == no-gpu ]]; then verdict+=" -- rehearsal expects 'no GPU': $( ((ok)) && echo met || echo MISSED)"
      else verdict+=" -- rehearsal expects PASS: $( ((ok)) && echo met || echo MISSED)"; fi
    fi
    summary+=("$verdict"); echo "$verdict"
  done
  echo; echo "== summary of $1 ($(($(date +%s) - t0)) s of $cap s)"
  printf '%s\n' "${summary[@]}"
  return $bad
}

rehearsal_checks() {  # what the rehearsal checks beyond the parts' verdicts
  local bad=0 f extra=() sum
  for f in "$OUT"/*; do [[ " $OUT_FILES " == *" $(basename "$f") "* ]] || extra+=("$(basename "$f")"); done
  local count; count=$(find "$OUT" -maxdepth 1 -type f | wc -l)
  if ((${#extra[@]} || count > 8)); then echo "FAIL rehearsal: $OUT holds $count files (at most 8, of: $OUT_FILES); unexpected: ${extra[*]:-none}"; bad=1
  else echo "PASS rehearsal: $OUT holds $count files, each one of the 7 named"; fi
  sum=$(only="" rehearse=0 plan all | sed -n 's/^#### all: budgets sum to \([0-9]*\) s.*/\1/p')
  if [[ -n $sum ]] && ((sum <= 540)); then echo "PASS rehearsal: the GPU plan's budgets sum to $sum s (<= 540)"
  else echo "FAIL rehearsal: the GPU plan's budgets sum to '${sum:-?}' s (more than 540)"; bad=1; fi
  return $bad
}

if [[ ${verbs[0]} == deps-configure ]]; then
  # The carried .deb files alone suffice: unpack them into a scratch prefix, configure
  # (the GPU build's flags) against it, check every dependency resolved there.
  sb=${SCRATCH_BUILD:-/tmp/scratch-build}
  flags=(-DCMAKE_BUILD_TYPE=Release -DRELPOS_CUDA=ON -DRELPOS_NATIVE=OFF -DRELPOS_DNNL=OFF -DRELPOS_MPI=OFF -DCMAKE_CUDA_ARCHITECTURES=90)
  if ((dry)); then
    echo "python3 scripts/gpu_check.py unpack-debs $DEBS SCRATCH"
    echo "cmake -S . -B $sb ${flags[*]} \$(python3 scripts/gpu_check.py cmake-args SCRATCH)"
    echo "python3 scripts/gpu_check.py verify-cache $sb/CMakeCache.txt SCRATCH"
    exit 0
  fi
  scratch=$(mktemp -d /tmp/relpos-deps.XXXXXX)
  trap 'rm -rf "$scratch" "$sb" "$sb.log"' EXIT
  rm -rf "$sb"
  python3 scripts/gpu_check.py unpack-debs "$DEBS" "$scratch" || exit 1
  mapfile -t deps < <(python3 scripts/gpu_check.py cmake-args "$scratch")
  ((${#deps[@]})) || exit 1
  printf '  %s\n' "${deps[@]}"
  cmake -S . -B "$sb" "${flags[@]}" "${deps[@]}" > "$sb.log" 2>&1 \
    || { tail -30 "$sb.log"; echo "FAIL configure against the carried packages"; exit 1; }
  grep -E "relpos BLAS|Configuring done|Generating done" "$sb.log"
  python3 scripts/gpu_check.py verify-cache "$sb/CMakeCache.txt" "$scratch" || exit 1
  echo "PASS configure against only the carried packages ($(du -sh "$DEBS" | cut -f1) of .deb files)"
  exit 0
fi

if ((dry)); then
  for v in "${verbs[@]}"; do plan "$v"; echo; done
  exit 0
fi

mkdir -p "$OUT" || exit 1
export TMP; TMP=$(mktemp -d /tmp/relpos-gpu-check.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
if [[ ${verbs[0]} == all ]]; then for f in $OUT_FILES; do rm -f "$OUT/$f"; done; fi
exec > >(tee -a "$OUT/gpu-check.log") 2>&1
status=0
for v in "${verbs[@]}"; do run_verb "$v" || status=1; done
if ((rehearse)); then
  echo; rehearsal_checks || status=1
  echo "gpu-check rehearsal: $( ((status == 0)) && echo PASS || echo FAIL) (no GPU here: the GPU parts must fail naming it)"
else
  echo "gpu-check: $( ((status == 0)) && echo PASS || echo FAIL)"
fi
exit $status
