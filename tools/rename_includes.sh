#!/usr/bin/env bash
# Move every relpos include to the installed layout:  #include "core/tensor.h"  ->  #include "relpos/core/tensor.h"
# (layers core, kernels, autograd, nn, trainers), in all C++/CUDA sources of the tree, and drop the
# pre-rename include roots from CMakeLists.txt (the repository root in the build, include/relpos in
# the installed package: the lines tagged "relpos-include-root: pre-rename"). "relpos/..." resolves
# through build/include/relpos -> the source tree, and through <prefix>/include when installed.
# Idempotent: a second run changes nothing. Run from anywhere:  tools/rename_includes.sh [REPO_ROOT]
set -euo pipefail
root=${1:-"$(cd "$(dirname "$0")/.." && pwd)"}
cd "$root"
[[ -f CMakeLists.txt && -d core && -d nn ]] || { echo "rename_includes: $root is not the relpos repository root" >&2; exit 2; }

mapfile -t files < <(find core kernels autograd nn trainers cli tests bench examples \
  -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | sort)
changed=0
for f in "${files[@]}"; do
  before=$(sha1sum "$f")
  sed -E -i \
    -e 's@^([[:space:]]*#[[:space:]]*include[[:space:]]*)"(core|kernels|autograd|nn|trainers)/@\1"relpos/\2/@' \
    -e 's@^([[:space:]]*#[[:space:]]*include[[:space:]]*)<(core|kernels|autograd|nn|trainers)/@\1<relpos/\2/@' \
    "$f"
  # tests/<dir>/x.cpp including "tests/helpers.h" (through the repository root) -> "../helpers.h"
  if [[ "$f" == tests/*/* ]]; then sed -E -i 's@^([[:space:]]*#[[:space:]]*include[[:space:]]*)"tests/@\1"../@' "$f"; fi
  [[ "$(sha1sum "$f")" != "$before" ]] && changed=$((changed + 1))
done
# CMake: the include roots that only the old spelling needs.
if grep -q 'relpos-include-root: pre-rename' CMakeLists.txt; then
  sed -i '/relpos-include-root: pre-rename/d' CMakeLists.txt
  # the INSTALL_INTERFACE include/relpos line carried the closing parenthesis: restore it
  sed -i -E 's@^(  \$<INSTALL_INTERFACE:include>)$@\1)@' CMakeLists.txt
  changed=$((changed + 1))
fi
left=$(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<](core|kernels|autograd|nn|trainers)/' "${files[@]}" || true)
if [[ -n "$left" ]]; then echo "rename_includes: old includes remain in: $left" >&2; exit 1; fi
echo "rename_includes: $changed file(s) changed"
