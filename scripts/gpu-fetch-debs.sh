#!/usr/bin/env bash
# scripts/gpu-fetch-debs.sh — run on a machine with Debian's apt (this repo's dev machine)
# before sending the tree to a GPU machine that cannot reach a package mirror: downloads the
# build dependencies as .deb files into .gpu-debs/ (git-ignored through .git/info/exclude),
# which scripts/gpu-check.sh unpacks there when the libraries are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.gpu-debs/' .git/info/exclude 2>/dev/null || echo '/.gpu-debs/' >> .git/info/exclude
mkdir -p .gpu-debs /tmp/relpos-apt/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/relpos-apt'
# shellcheck disable=SC2086
apt-get $o update -qq
pkgs=(libyaml-cpp-dev libyaml-cpp0.7 libfmt-dev libfmt9 catch2 nlohmann-json3-dev libcli11-dev
      libopenblas-openmp-dev libopenblas0-openmp libopenblas-dev libgomp1 libgfortran5)
# shellcheck disable=SC2086
(cd .gpu-debs && apt-get $o download "${pkgs[@]}")
du -sh .gpu-debs
