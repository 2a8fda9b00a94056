// core/strided.h — the one N-d strided loop that elementwise kernels, copies and
// broadcasting are built on. Operands share one logical shape; each has its own element
// strides (0 for a broadcast dim). Adjacent dims that are contiguous for every operand are
// merged first, so a contiguous tensor is a single row. Work is split across OpenMP threads
// by rows (or by chunks of a long row); every element is written by exactly one thread, so
// results do not depend on the thread count.
#pragma once
#include <omp.h>

#include <array>
#include <cstdint>
#include <vector>

#include "core/shape.h"

namespace relpos {

// f(std::array<int64_t, N> offsets, int64_t n, std::array<int64_t, N> inner_strides)
// visits a run of n elements; operand k starts at offsets[k] and steps inner_strides[k].
template <size_t N, typename F>
void for_each_run(const Shape& shape, const std::array<Shape, N>& strides, F&& f) {
  const int64_t total = numel_of(shape);
  if (total == 0) return;
  // Drop size-1 dims, then merge dims that are contiguous for all operands.
  std::vector<int64_t> sz;
  std::vector<std::array<int64_t, N>> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    std::array<int64_t, N> s;
    for (size_t k = 0; k < N; ++k) s[k] = strides[k][d];
    if (!sz.empty()) {
      bool merge = true;
      for (size_t k = 0; k < N; ++k) merge = merge && st.back()[k] == s[k] * shape[d];
      if (merge) {
        sz.back() *= shape[d];
        st.back() = s;
        continue;
      }
    }
    sz.push_back(shape[d]);
    st.push_back(s);
  }
  if (sz.empty()) {  // a single element
    sz.push_back(1);
    st.push_back({});
  }
  const int64_t nd = int64_t(sz.size());
  const int64_t inner = sz.back();
  const std::array<int64_t, N> inner_st = st.back();
  const int64_t rows = total / inner;
  // Split long rows into chunks so a single contiguous row still uses every thread.
  const int64_t chunk = (rows < 64 && inner > 65536) ? 16384 : inner;
  const int64_t pieces = (inner + chunk - 1) / chunk;
  const int64_t units = rows * pieces;
  auto run_unit = [&](int64_t u) {
    int64_t r = u / pieces, p = u % pieces;
    std::array<int64_t, N> off{};
    for (int64_t d = nd - 2; d >= 0; --d) {
      int64_t i = r % sz[d];
      r /= sz[d];
      for (size_t k = 0; k < N; ++k) off[k] += i * st[d][k];
    }
    int64_t start = p * chunk;
    for (size_t k = 0; k < N; ++k) off[k] += start * inner_st[k];
    f(off, std::min(chunk, inner - start), inner_st);
  };
  if (total >= 32768 && units > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int64_t u = 0; u < units; ++u) run_unit(u);
  } else {
    for (int64_t u = 0; u < units; ++u) run_unit(u);
  }
}

}  // namespace relpos
