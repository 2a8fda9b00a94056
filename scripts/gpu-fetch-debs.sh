#!/usr/bin/env bash
# scripts/gpu-fetch-debs.sh — run on a machine with Debian's apt (this repo's dev machine,
# bookworm, amd64) before sending the tree to a GPU machine that reaches no package registry:
# downloads every build dependency as .deb files into .gpu-debs/ (git-ignored; about 14 MB),
# which `scripts/gpu-check.sh build` unpacks into a prefix there when a header is missing
# (python3 reads the .deb archives: the GPU machine need not be Debian or have dpkg).
#   yaml-cpp, fmt: headers + CMake configs + shared libraries
#   Catch2 (v2), CLI11, nlohmann-json: header-only, with CMake configs
#   OpenBLAS (OpenMP build): cblas.h + libopenblas, and its runtime libgfortran5 + libquadmath0
# Not carried: oneDNN (libdnnl, ~25 MB with its OpenCL loader; RELPOS_DNNL=AUTO builds the CPU
# GEMMs on OpenBLAS there), libc6, libstdc++6, libgcc-s1, libgomp1 (the GPU machine's compiler brings them;
# the carried libraries need glibc >= 2.34 and libstdc++ from GCC >= 11), MPI (optional).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpu-debs /tmp/relpos-apt/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/relpos-apt'
# shellcheck disable=SC2086
apt-get $o update -qq
pkgs=(libyaml-cpp-dev libyaml-cpp0.7 libfmt-dev libfmt9 catch2 libcli11-dev nlohmann-json3-dev
      libopenblas-openmp-dev libopenblas0-openmp libgfortran5 libquadmath0)
rm -f .gpu-debs/*.deb
# shellcheck disable=SC2086
(cd .gpu-debs && apt-get $o download "${pkgs[@]}")
ls .gpu-debs
du -sh .gpu-debs
