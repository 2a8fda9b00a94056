#!/usr/bin/env bash
# tests/hostile/disk_full.sh — the ctest `hostile_disk_full`: train, inspect and sweep writing
# into a small tmpfs (a full disk). Each must exit 1 with a line naming the file and the reason
# ("No space left on device"), claim nothing it did not write, leave every listed checkpoint
# loadable and no temporary file behind.
# Needs root and a kernel that lets this process mount a tmpfs: otherwise exit 77 (ctest: Skipped).
#   disk_full.sh <relpos binary>
set -uo pipefail
relpos=${1:?usage: disk_full.sh <relpos binary>}
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root to mount a tmpfs"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/disk_full.XXXXXX")
mnt=$work/small
mkdir -p "$mnt"
cleanup() { umount "$mnt" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
small_disk() {  # a fresh tmpfs of size $1 at $mnt
  umount "$mnt" 2>/dev/null
  mount -t tmpfs -o "size=$1" tmpfs "$mnt" 2>"$work/mount.err" ||
    { echo "SKIP: cannot mount a tmpfs: $(cat "$work/mount.err")"; exit 77; }
}
small_disk 16k
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
# expect NAME CODE OUT: exit code CODE, and the output names the disk and "No space left on device"
expect() {
  local name=$1 code=$2 rc=$3 out=$4
  if [[ $rc -ne $code ]]; then fail "$name: exit $rc, expected $code. Output:"; echo "$out" | tail -5; return 1; fi
  if ! grep -q "No space left on device" <<<"$out"; then fail "$name: no 'No space left on device' in:"; echo "$out" | tail -5; return 1; fi
  if ! grep -q "$mnt" <<<"$out"; then fail "$name: the error names no file on the full disk:"; echo "$out" | tail -5; return 1; fi
  return 0
}
no_temporaries() {  # nothing named *.tmp or .tmp-* left on the small disk
  local left
  left=$(find "$mnt" \( -name '*.tmp' -o -name '.tmp-*' \) 2>/dev/null)
  [[ -z $left ]] || { fail "$1: temporary files left: $left"; return 1; }
}

config() {  # a copy-task decoder that trains in well under a second, into $1
  cat <<YAML
model: {d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32, max_len: 32, position: {type: t5}}
data: {task: copy, vocab_size: 6, seq_len: 4, batch_size: 4}
optim: {lr: 1.0e-3}
train: {steps: 6, eval_every: 3, eval_batches: 1, log_every: 3, checkpoint_every: 3, keep_last: 0}
output: {dir: $1}
YAML
}

# 1. train: the first checkpoint does not fit (16 KiB)
config "$mnt/run" > "$work/c.yaml"
out=$("$relpos" --threads 1 train "$work/c.yaml" 2>&1); rc=$?
if expect "train, first checkpoint" 1 $rc "$out"; then
  grep -q "^checkpoint:" <<<"$out" && fail "train, first checkpoint: a checkpoint was claimed: $out"
  [[ -z $(ls "$mnt/run/checkpoints" 2>/dev/null) ]] || fail "train, first checkpoint: checkpoints/ holds $(ls "$mnt/run/checkpoints")"
  no_temporaries "train, first checkpoint" && pass "train, first checkpoint: exit 1, ENOSPC named, nothing claimed"
fi

# 2. train: the first checkpoint fits, the second does not (64 KiB); the first stays loadable
small_disk 64k
out=$("$relpos" --threads 1 train "$work/c.yaml" 2>&1); rc=$?
if expect "train, second checkpoint" 1 $rc "$out"; then
  grep -q "step_00000006" <<<"$(grep '^checkpoint:' <<<"$out")" && fail "train, second checkpoint: step 6 claimed"
  [[ $(ls "$mnt/run/checkpoints") == step_00000003 ]] || fail "train, second checkpoint: checkpoints/ holds $(ls "$mnt/run/checkpoints")"
  ev=$("$relpos" --threads 1 eval "$mnt/run" 2>&1) || fail "train, second checkpoint: the kept checkpoint does not load: $ev"
  no_temporaries "train, second checkpoint" && pass "train, second checkpoint: exit 1, step 3 kept and loadable"
fi

# 3. inspect --out on a full disk (a run on the big disk, its report into 4 KiB)
config "$work/run" > "$work/c2.yaml"
"$relpos" --threads 1 train "$work/c2.yaml" > "$work/train.log" 2>&1 || { fail "inspect: setup training failed"; cat "$work/train.log"; }
small_disk 4k
out=$("$relpos" --threads 1 inspect "$work/run" --out "$mnt/inspect" 2>&1); rc=$?
if expect "inspect" 1 $rc "$out"; then
  grep -q "^wrote" <<<"$out" && fail "inspect: claims '$(grep '^wrote' <<<"$out")'"
  no_temporaries "inspect" && pass "inspect: exit 1, ENOSPC named, nothing claimed"
fi

# 4. sweep into 64 KiB: points fail on their checkpoints; the sweep says so and exits 1
small_disk 64k
printf 'base: %s\ngrid:\n  optim.lr: [0.001, 0.002]\n' "$work/c.yaml" > "$work/sweep.yaml"
out=$("$relpos" --threads 1 sweep "$work/sweep.yaml" --dir "$mnt/sweep" 2>&1); rc=$?
index=$(cat "$mnt/sweep/sweep.jsonl" 2>/dev/null)
if expect "sweep" 1 $rc "$out"$'\n'"$index"; then
  grep -q "points run failed" <<<"$out" || fail "sweep: no 'points run failed' line: $(tail -3 <<<"$out")"
  no_temporaries "sweep" && pass "sweep: exit 1, failed points counted, ENOSPC named"
fi

[[ $failures -eq 0 ]] || { echo "$failures disk-full check(s) failed"; exit 1; }
echo "all disk-full checks passed"
