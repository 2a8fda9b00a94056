#!/usr/bin/env bash
# The main job: install dependencies, build, and train the bundled default config on CPU.
#   scripts/quickstart.sh                      -> relpos train configs/quickstart.yaml
#   scripts/quickstart.sh configs/decoder_t5.yaml --set train.steps=200
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
config=configs/quickstart.yaml
if [[ $# -gt 0 && "$1" != --* ]]; then config=$1; shift; fi
exec ./build/relpos train "$config" "$@"
