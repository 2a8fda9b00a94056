#!/usr/bin/env bash
# Install the Debian packages relpos needs; does nothing when they are all present.
#   scripts/install-deps.sh          build + test dependencies
#   scripts/install-deps.sh --fuzz   also clang-14, its sanitizer + libFuzzer runtimes and OpenMP (the
#                                    sanitizer build: scripts/build.sh with RELPOS_SANITIZE=1)
set -euo pipefail
pkgs=(cmake g++ make libopenblas-openmp-dev libdnnl-dev libyaml-cpp-dev libfmt-dev catch2 libcli11-dev nlohmann-json3-dev
      pkg-config ccache python3-matplotlib python3-numpy python3-yaml python3-torch python3-sklearn
      openmpi-bin libopenmpi-dev libsentencepiece-dev)
# python3-matplotlib: relpos report (and its tests); python3-torch + yaml: the PyTorch loader test
# (ctest torch_loader); ccache: rebuilds reuse unchanged objects (scripts/build.sh); pkg-config: scripts/test-install.sh's pkg-config consumer;
# openmpi-bin, libopenmpi-dev: data-parallel training (mpirun -np N relpos train) and its ctest checks.
# python3-sklearn: scripts/prepare_digits.py reads its bundled 8x8 digits (ctest digits_data).
# libsentencepiece-dev: data.tokenizer.type sentencepiece (subword tokens, docs/data.md).
[[ "${1:-}" == "--fuzz" ]] && pkgs+=(clang-14 libclang-rt-14-dev libomp-14-dev)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "installing: ${missing[*]}"
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
