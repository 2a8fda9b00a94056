#!/usr/bin/env bash
# bench/setup_torch2.sh — the PyTorch 2.x peer of bench/run_train_bench.sh (PEERS="torch2 torch2c").
# Creates a virtual environment at bench/.venv-torch2 (git-ignored) with /usr/bin/python3 -m venv
# and installs torch + numpy from PyPI (the default index; the default Linux x86_64 wheel pulls
# the CUDA runtime wheels too, ~6 GB on disk). Idempotent: does nothing but print the version when
# torch already imports there. Never run by the tests or CI; only for the benchmark.
#   VENV=/other/path bench/setup_torch2.sh   puts it elsewhere (run_train_bench.sh honours TORCH2_VENV).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/bench/.venv-torch2}"
PY=/usr/bin/python3

if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "import torch, numpy" 2>/dev/null; then
  echo "# $VENV already set up"
else
  if ! "$PY" -c "import venv, ensurepip" 2>/dev/null; then
    echo "# python3-venv is missing; installing it (apt-get)" >&2
    if [[ $(id -u) == 0 ]]; then apt-get install -y python3-venv; else sudo apt-get install -y python3-venv; fi
  fi
  [[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --upgrade pip
  "$VENV/bin/python" -m pip install torch numpy
fi
"$VENV/bin/python" - <<'PY'
import torch, numpy
print(f"torch {torch.__version__} (numpy {numpy.__version__}) in {torch.__file__.rsplit('/torch/', 1)[0]}")
PY
