#!/usr/bin/env bash
# The main job: install dependencies, build, and train the bundled default on CPU.
# Extra arguments go to `relpos demo` (e.g. --steps 500).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
exec ./build/relpos demo "$@"
