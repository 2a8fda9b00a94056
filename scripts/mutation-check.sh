#!/usr/bin/env bash
# scripts/mutation-check.sh — does the test suite catch realistic bugs? (issue 23)
#
# Plants each mutation of a fixed list (scripts/mutations.txt: ~20 one-line bugs, one per
# layer and per position-encoding family, including the three that survived in issue 23) into
# the working tree, ONE AT A TIME: exact-string replacement in one file, an incremental rebuild
# (cmake --build), the unit suite (ctest -L '^unit$' --stop-on-failure), then the file is
# restored from a backup copy (checked with cmp). A mutant is CAUGHT when a test fails,
# "CAUGHT (build)" when it does not even compile (a weaker catch, counted apart), SURVIVED
# when the whole suite passes. On demand, not in CI.
#
# Time: one incremental rebuild (the mutated .cpp and the links) plus one run of the unit
# suite per mutation, plus one unmutated baseline run first and a final rebuild; the total is
# unknown until it has been run once (budget roughly 25 x the time of `ctest -L unit`).
#
# Usage: scripts/mutation-check.sh [--list | --check] [--only ID[,ID...]] [--build-dir DIR]
#                                  [--full] [-j N] [--no-baseline]
#   --list         print the mutations, apply nothing
#   --check        verify every original string occurs exactly once in its file, apply nothing;
#                  exits non-zero naming each mutation that does not
#   --only IDS     run (or list/check) only these mutation ids, comma-separated
#   --build-dir D  an already configured build directory (default: build)
#   --full         run all of ctest instead of the unit label
#   -j N           parallelism of the build and of ctest (default: nproc)
#   --no-baseline  skip the unmutated build + suite run that comes first (it guards against
#                  counting an already failing suite as "every mutant caught")
#
# Reading the output: one line per mutation (id, verdict, seconds, detail), e.g.
#   [ 3/23] resume-skipped-reset         CAUGHT            412s  by: <first failing ctest entry> (Failed)
#   [ 4/23] some-id                      SURVIVED          380s  no test failed      <- a gap in the suite
#   [ 5/23] other-id                     CAUGHT (build)     20s  the mutant does not compile
#   [ 6/23] odd-id                       ERROR              31s  ctest failed without naming a test
# then "score: N/M caught" and the survivors (and errors) with their descriptions. Each
# mutation's build + ctest output is in ${OUT:-mutation-out}/ID.log (baseline.log,
# final-build.log too). Exit status: 0 only when every selected mutation is caught;
# 1 otherwise; 2 usage/setup errors (bad list, dirty target files, no build dir); 3 the
# unmutated baseline fails; 4 a restore or the final rebuild failed (read the message);
# 130 interrupted. Logs go to mutation-out/ under the current directory unless OUT is set.
#
# Safety: the working tree is mutated in place. The script refuses to start when a target
# file has uncommitted (staged or unstaged) changes; it keeps a backup of the file being
# mutated and restores it on every exit path (error, Ctrl-C, TERM), verifies the restore with
# cmp and against git, then rebuilds incrementally so the build matches the sources again.
# Do not edit or build this checkout while it runs.
set -uo pipefail

INVOKE_DIR=$(pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LIST="$ROOT/scripts/mutations.txt"

MODE=run
ONLY=""
BUILD_ARG="build"
FULL=0
JOBS=$(nproc 2>/dev/null || echo 4)
BASELINE=1

usage() { sed -n '/^# Usage:/,/^#$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() { echo "mutation-check: $*" >&2; exit 2; }

while (($#)); do
  case "$1" in
    --list) MODE=list ;;
    --check) MODE=check ;;
    --only) (($# >= 2)) || die "--only needs ID[,ID...]"; ONLY=$2; shift ;;
    --only=*) ONLY=${1#*=} ;;
    --build-dir) (($# >= 2)) || die "--build-dir needs a directory"; BUILD_ARG=$2; shift ;;
    --build-dir=*) BUILD_ARG=${1#*=} ;;
    --full) FULL=1 ;;
    -j) (($# >= 2)) || die "-j needs a number"; JOBS=$2; shift ;;
    -j*) JOBS=${1#-j} ;;
    --jobs=*) JOBS=${1#*=} ;;
    --no-baseline) BASELINE=0 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
  shift
done
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "-j wants a positive integer, got '$JOBS'"
command -v python3 >/dev/null || die "python3 is needed (it parses the list and applies the mutations)"

# ---------------------------------------------------------------------------------------------
# The list: parsed, checked and applied by this embedded python3 (exact strings, no regex).
#   ids LIST [ONLY]        selected ids, one per line (unknown ONLY ids: error)
#   get LIST ID KEY        one field
#   list LIST [ONLY]       human-readable listing
#   check LIST ROOT [ONLY] each 'from' must occur exactly once in its file
#   apply LIST ROOT ID     replace the single occurrence in place
read -r -d '' PY <<'PYEOF'
import os, re, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C: die quietly; the shell's trap restores

KEYS = ("id", "file", "desc", "from", "to")
OPTIONAL = ("focus",)  # a ctest -R regex run first (the tests meant to catch it); the whole suite only if they pass

def die(msg, code=2):
    print("mutation-check: " + msg, file=sys.stderr)
    sys.exit(code)

def parse(path):
    recs, cur = [], None
    try:
        lines = open(path, encoding="utf-8").read().split("\n")
    except OSError as e:
        die(f"cannot read the mutation list {path}: {e}")
    for n, line in enumerate(lines + [""], 1):
        if line.startswith("#"):
            continue
        if not line.strip():
            if cur is not None:
                recs.append(cur)
                cur = None
            continue
        m = re.match(r"^(id|file|desc|from|to|focus):(.*)$", line)
        if not m:
            die(f"{path}:{n}: expected 'key: value' (key: {', '.join(KEYS)}), got: {line!r}")
        if cur is None:
            cur = {"_line": n}
        if m.group(1) in cur:
            die(f"{path}:{n}: '{m.group(1)}' given twice in one record (missing blank line between records?)")
        cur[m.group(1)] = m.group(2).strip()
    seen = set()
    for r in recs:
        where = f"{path}:{r['_line']}"
        missing = [k for k in KEYS if k not in r]
        if missing:
            die(f"{where}: record {r.get('id', '?')!r} lacks {', '.join(missing)}")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", r["id"]):
            die(f"{where}: id {r['id']!r} may only use letters, digits, '_', '.', '-'")
        if r["id"] in seen:
            die(f"{where}: id {r['id']!r} is used twice")
        seen.add(r["id"])
        if not r["from"]:
            die(f"{where}: mutation {r['id']}: empty 'from'")
        if r["from"] == r["to"]:
            die(f"{where}: mutation {r['id']}: 'to' equals 'from' (nothing would change)")
        if os.path.isabs(r["file"]) or ".." in r["file"].split("/"):
            die(f"{where}: mutation {r['id']}: file must be a path inside the repository, got {r['file']!r}")
    if not recs:
        die(f"{path}: no mutations")
    return recs

def select(recs, only):
    if not only:
        return recs
    want = [x for x in only.split(",") if x]
    ids = {r["id"] for r in recs}
    unknown = [x for x in want if x not in ids]
    if unknown:
        die(f"--only: unknown mutation id(s): {', '.join(unknown)} (see --list)")
    return [r for r in recs if r["id"] in want]

def occurrences(text, s):
    out, i = [], text.find(s)
    while i >= 0:
        out.append(i)
        i = text.find(s, i + 1)
    return out

def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8", newline="") as f:
        return f.read()

cmd = sys.argv[1]
if cmd == "ids":
    for r in select(parse(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else ""):
        print(r["id"])
elif cmd == "get":
    recs = {r["id"]: r for r in parse(sys.argv[2])}
    print(recs[sys.argv[3]].get(sys.argv[4], ""))
elif cmd == "list":
    sel = select(parse(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "")
    for i, r in enumerate(sel, 1):
        print(f"{i:2d}. {r['id']:<28} {r['file']}")
        print(f"    {r['desc']}")
        print(f"    - {r['from']}")
        print(f"    + {r['to'] if r['to'] else '(deleted)'}")
    print(f"{len(sel)} mutation(s)")
elif cmd == "check":
    root = sys.argv[3]
    sel = select(parse(sys.argv[2]), sys.argv[4] if len(sys.argv) > 4 else "")
    bad = 0
    for r in sel:
        try:
            text = read(root, r["file"])
        except OSError as e:
            print(f"FAIL  {r['id']}: cannot read {r['file']}: {e.strerror}")
            bad += 1
            continue
        occ = occurrences(text, r["from"])
        if len(occ) == 1:
            line = text.count("\n", 0, occ[0]) + 1
            print(f"ok    {r['id']:<28} {r['file']}:{line}")
        else:
            lines = ", ".join(str(text.count("\n", 0, o) + 1) for o in occ)
            extra = f" (lines {lines})" if occ else ""
            print(f"FAIL  {r['id']}: its original text occurs {len(occ)} times in {r['file']}{extra}, "
                  f"expected exactly once: {r['from']!r}")
            bad += 1
    if bad:
        print(f"{bad} of {len(sel)} mutation(s) do not match their file exactly once: fix scripts/mutations.txt")
        sys.exit(1)
    print(f"all {len(sel)} mutation(s): the original text occurs exactly once")
elif cmd == "apply":
    root, mid = sys.argv[3], sys.argv[4]
    r = {x["id"]: x for x in parse(sys.argv[2])}[mid]
    text = read(root, r["file"])
    occ = occurrences(text, r["from"])
    if len(occ) != 1:
        die(f"mutation {mid}: its original text occurs {len(occ)} times in {r['file']}, expected exactly once")
    with open(os.path.join(root, r["file"]), "w", encoding="utf-8", newline="") as f:
        f.write(text.replace(r["from"], r["to"], 1))
else:
    die(f"internal: unknown command {cmd}")
PYEOF
mut() { python3 -S -c "$PY" "$@"; }  # -S: the standard library is all it needs

# ---------------------------------------------------------------------------------------------
case "$MODE" in
  list) mut list "$LIST" "$ONLY"; exit $? ;;
  check) mut check "$LIST" "$ROOT" "$ONLY"; exit $? ;;
esac

cd "$ROOT" || die "cannot cd to $ROOT"
ids_out=$(mut ids "$LIST" "$ONLY") || exit 2
mapfile -t IDS <<<"$ids_out"
((${#IDS[@]} > 0)) || die "no mutations selected"
if ! chk=$(mut check "$LIST" "$ROOT" "$ONLY" 2>&1); then
  echo "$chk" >&2
  die "refusing to run: the mutation list does not match the sources (see above)"
fi

abspath() { [[ "$1" == /* ]] && echo "$1" || echo "$INVOKE_DIR/$1"; }
if [[ "$BUILD_ARG" == build ]]; then BUILD="$ROOT/build"; else BUILD=$(abspath "$BUILD_ARG"); fi
OUTDIR=$(abspath "${OUT:-mutation-out}")
[[ -f "$BUILD/CMakeCache.txt" ]] || die "$BUILD is not a configured build directory (run scripts/build.sh, or pass --build-dir)"
mkdir -p "$OUTDIR" || die "cannot create $OUTDIR"

declare -A FILE_OF DESC_OF FOCUS_OF
TARGETS=()
for id in "${IDS[@]}"; do
  FILE_OF[$id]=$(mut get "$LIST" "$id" file)
  DESC_OF[$id]=$(mut get "$LIST" "$id" desc)
  FOCUS_OF[$id]=$(mut get "$LIST" "$id" focus)
  [[ " ${TARGETS[*]} " == *" ${FILE_OF[$id]} "* ]] || TARGETS+=("${FILE_OF[$id]}")
done

# Refuse to touch files with uncommitted work: a restore must give back exactly HEAD's text.
dirty=()
for f in "${TARGETS[@]}"; do
  git ls-files --error-unmatch -- "$f" >/dev/null 2>&1 || die "$f is not tracked by git; refusing to mutate it"
  git diff --quiet -- "$f" && git diff --cached --quiet -- "$f" || dirty+=("$f")
done
((${#dirty[@]} == 0)) || die "refusing to start: uncommitted changes in ${dirty[*]} (commit or stash them first)"

# mutation_list_matches_sources fails for every applied mutant (the original text is gone from
# the file), so in the suite it would report each survivor as caught: excluded here.
CTEST_ARGS=(-j "$JOBS" --stop-on-failure --timeout 900 --no-tests=error --output-on-failure
  -E '^mutation_list_matches_sources$')
((FULL)) || CTEST_ARGS+=(-L '^unit$')

# ---------------------------------------------------------------------------------------------
# Restore machinery: the file being mutated is CUR_FILE; its original is $BACKUP_DIR/orig.
BACKUP_DIR=$(mktemp -d "${TMPDIR:-/tmp}/relpos-mutation.XXXXXX") || die "mktemp failed"
CUR_FILE=""
CUR_ID=""
RESYNC=0       # a mutant was built: rebuild at the end
KEEP_BACKUP=0  # a restore failed: keep the original for the user
CHILD=""       # the running build/ctest (its own process group)

# Builds and ctest run in the background in their own process group, and the script waits
# for them: a signal then reaches the traps below at once (ctest itself catches Ctrl-C and
# exits normally, which a foreground `ctest` would let the script run on after), and the
# trap can stop the whole group (compilers, test processes).
run_child() {
  if command -v setsid >/dev/null 2>&1; then setsid "$@" </dev/null & else "$@" </dev/null & fi
  CHILD=$!
  wait "$CHILD"
  local rc=$?
  CHILD=""
  return "$rc"
}

stop_child() {
  [[ -n "$CHILD" ]] || return 0
  kill -TERM -- "-$CHILD" 2>/dev/null || kill -TERM "$CHILD" 2>/dev/null
  local _
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    kill -0 "$CHILD" 2>/dev/null || break
    sleep 0.5
  done
  kill -KILL -- "-$CHILD" 2>/dev/null || kill -KILL "$CHILD" 2>/dev/null
  wait "$CHILD" 2>/dev/null
  CHILD=""
}

restore_current() {
  [[ -n "$CUR_FILE" ]] || return 0
  # cp without -p: the restored file gets a new mtime, so the next build recompiles it
  if cp -- "$BACKUP_DIR/orig" "$CUR_FILE" && touch -- "$CUR_FILE" && cmp -s -- "$BACKUP_DIR/orig" "$CUR_FILE"; then
    CUR_FILE=""
    CUR_ID=""
    return 0
  fi
  echo "mutation-check: FATAL: could not restore $CUR_FILE (mutation $CUR_ID); its original is in $BACKUP_DIR/orig" >&2
  KEEP_BACKUP=1
  return 1
}

on_exit() {
  local rc=$?
  trap '' INT TERM HUP  # finish the restore whatever happens
  exec 1>&3 2>&4        # a signal may arrive inside a function whose output goes to a log
  stop_child
  if [[ -n "$CUR_FILE" ]]; then
    echo "mutation-check: restoring $CUR_FILE (mutation $CUR_ID)" >&2
    restore_current || rc=4
  fi
  local f left=()
  for f in "${TARGETS[@]}"; do
    git diff --quiet -- "$f" || left+=("$f")
  done
  if ((${#left[@]})); then
    echo "mutation-check: WARNING: ${left[*]} still differ from git HEAD after the restore; check them (git diff)" >&2
    rc=4
  fi
  # a second Ctrl-C stops the final rebuild (the sources are already restored)
  trap 'stop_child; echo "mutation-check: final rebuild interrupted; run: cmake --build $BUILD" >&2; exit 130' INT TERM HUP
  if ((RESYNC)); then
    echo "final incremental rebuild of the restored sources ($OUTDIR/final-build.log) ..."
    if ! run_child cmake --build "$BUILD" -j "$JOBS" >"$OUTDIR/final-build.log" 2>&1; then
      echo "mutation-check: WARNING: the final rebuild failed (see $OUTDIR/final-build.log);" \
        "run 'cmake --build $BUILD' before trusting that build" >&2
      ((rc == 0)) && rc=4
    fi
  fi
  ((KEEP_BACKUP)) || rm -rf -- "$BACKUP_DIR"
  exit "$rc"
}
exec 3>&1 4>&2  # the terminal, for the traps
trap on_exit EXIT
trap 'echo >&3; echo "mutation-check: interrupted" >&4; exit 130' INT TERM HUP

# The first failing test of a ctest log: the first entry of "The following tests FAILED:",
# else the first "***Failed/Exception/Timeout" progress line.
first_failure() {
  local name
  name=$(awk '/The following tests FAILED:/ { f = 1; next }
              f && /^[[:space:]]*[0-9]+ - / { sub(/^[[:space:]]*[0-9]+ - /, ""); sub(/[[:space:]]+$/, ""); print; exit }' "$1")
  if [[ -z "$name" ]]; then
    name=$(grep -m1 -E 'Test +#[0-9]+: .*\*\*\*' "$1" | sed -E 's/^.*Test +#[0-9]+: //; s/ *\.*\*\*\*/ (/; s/ +[0-9.]+ sec *$//; s/$/)/')
  fi
  echo "$name"
}

run_suite() {  # $1: log (appended), $2: optional ctest -R regex (the focus stage); returns ctest's status
  local args=("${CTEST_ARGS[@]}")
  [[ -n "${2:-}" ]] && args+=(-R "$2")
  echo "== ctest ${args[*]} (in $BUILD)" >>"$1"
  run_child bash -c 'cd "$1" && shift && exec ctest "$@"' ctest-in "$BUILD" "${args[@]}" >>"$1" 2>&1
}

build() {  # $1: log (appended)
  echo "== cmake --build $BUILD -j $JOBS" >>"$1"
  run_child cmake --build "$BUILD" -j "$JOBS" >>"$1" 2>&1
}

suite_desc=$( ((FULL)) && echo "all of ctest" || echo "ctest -L '^unit\$'")
echo "mutation-check: ${#IDS[@]} mutation(s), build $BUILD, $suite_desc, -j $JOBS, logs in $OUTDIR"

if ((BASELINE)); then
  log="$OUTDIR/baseline.log"
  : >"$log"
  printf '[baseline] unmutated build + suite ... '
  t0=$SECONDS
  if ! build "$log"; then
    echo "BUILD FAILED ($((SECONDS - t0))s)"
    echo "mutation-check: the unmutated tree does not build (see $log); nothing was mutated" >&2
    exit 3
  fi
  if ! run_suite "$log"; then
    ff=$(first_failure "$log")
    echo "FAILED ($((SECONDS - t0))s): ${ff:-no failing test named (no tests labelled 'unit'?)}"
    echo "mutation-check: the unmutated suite fails (see $log); every mutant would look caught. Fix that first." >&2
    exit 3
  fi
  echo "passed ($((SECONDS - t0))s)"
fi

declare -A RESULT DETAIL
n=0
total=${#IDS[@]}
for id in "${IDS[@]}"; do
  n=$((n + 1))
  file=${FILE_OF[$id]}
  log="$OUTDIR/$id.log"
  printf '== mutation %s: %s\n== file %s\n' "$id" "${DESC_OF[$id]}" "$file" >"$log"
  printf '[%2d/%d] %-28s ' "$n" "$total" "$id"
  t0=$SECONDS

  cp -- "$file" "$BACKUP_DIR/orig" || die "cannot back up $file"
  CUR_FILE=$file
  CUR_ID=$id
  if ! mut apply "$LIST" "$ROOT" "$id" 2>>"$log"; then
    echo "APPLY FAILED (see $log)"
    restore_current || exit 4
    exit 2
  fi
  git diff --no-color -- "$file" >>"$log" 2>&1
  RESYNC=1

  if ! build "$log"; then
    RESULT[$id]=build
    DETAIL[$id]="the mutant does not compile"
  elif { [[ -z "${FOCUS_OF[$id]}" ]] || run_suite "$log" "${FOCUS_OF[$id]}"; } && run_suite "$log"; then
    # the focus tests (when given) passed, and so did the whole suite
    RESULT[$id]=survived
    DETAIL[$id]=""
  else
    ff=$(first_failure "$log")
    if [[ -n "$ff" ]]; then
      RESULT[$id]=caught
      DETAIL[$id]="by: $ff"
    else
      RESULT[$id]=error
      DETAIL[$id]="ctest failed without naming a failing test (see $log)"
    fi
  fi

  restore_current || exit 4
  git diff --quiet -- "$file" || { echo; die "$file differs from HEAD after restoring mutation $id"; }
  dt=$((SECONDS - t0))
  echo "== result: ${RESULT[$id]} ${DETAIL[$id]} (${dt}s)" >>"$log"
  case "${RESULT[$id]}" in
    caught) printf '%-15s %5ss  %s\n' CAUGHT "$dt" "${DETAIL[$id]}" ;;
    build) printf '%-15s %5ss  %s\n' "CAUGHT (build)" "$dt" "${DETAIL[$id]}" ;;
    survived) printf '%-15s %5ss  %s\n' SURVIVED "$dt" "no test failed" ;;
    error) printf '%-15s %5ss  %s\n' ERROR "$dt" "${DETAIL[$id]}" ;;
  esac
done

caught=0
by_build=0
survivors=()
errors=()
for id in "${IDS[@]}"; do
  case "${RESULT[$id]}" in
    caught) caught=$((caught + 1)) ;;
    build) caught=$((caught + 1)); by_build=$((by_build + 1)) ;;
    survived) survivors+=("$id") ;;
    error) errors+=("$id") ;;
  esac
done

echo
extra=""
((by_build)) && extra=" ($by_build of them only because the mutant did not compile)"
echo "score: $caught/$total caught$extra"
if ((${#survivors[@]})); then
  echo "survivors (no test failed):"
  for id in "${survivors[@]}"; do echo "  $id  ${FILE_OF[$id]}: ${DESC_OF[$id]}"; done
else
  echo "survivors: none"
fi
if ((${#errors[@]})); then
  echo "errors (ctest failed without naming a test; not counted as caught):"
  for id in "${errors[@]}"; do echo "  $id  ${FILE_OF[$id]}: see $OUTDIR/$id.log"; done
fi
((caught == total)) && exit 0 || exit 1
