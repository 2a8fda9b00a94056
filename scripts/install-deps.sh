#!/usr/bin/env bash
# Install the Debian packages relpos needs; does nothing when they are all present.
#   scripts/install-deps.sh          build + test dependencies
#   scripts/install-deps.sh --bench  also python3-torch (PyTorch reference for bench/ and tools/)
set -euo pipefail
pkgs=(cmake g++ make libopenblas-openmp-dev libyaml-cpp-dev libfmt-dev catch2 libcli11-dev nlohmann-json3-dev)
[[ "${1:-}" == "--bench" ]] && pkgs+=(python3-torch python3-numpy)

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
