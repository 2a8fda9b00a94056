// kernels/cpu/reduce.cpp — sum, mean, max, min, logsumexp and var over any set of dims.
// The input is permuted so kept dims come first and reduced dims last; each output element
// then reduces one contiguous run (after a copy only if the permuted view is strided).
// float32 accumulates in double, so sums do not depend on thread count or blocking.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/backend.h"

namespace relpos::k::cpu {

namespace {

// Sum/mean over the leading dims of a contiguous tensor (bias gradients: [R, C] -> [C]):
// column sums in place, rows added in order, no transposed copy.
void sum_leading(Reduce op, const Tensor& x, int64_t R, int64_t C, Tensor& out) {
  visit_float(x.dtype(), "reduce", [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    // Column blocks of 64 (8 vectors of double accumulators): the bias gradients of a d_model of
    // 128 or 256 split across threads too (blocks of 256 left them to one thread). Each column
    // still adds its rows in order, so the result does not depend on the block or thread count.
    constexpr int64_t kBlock = 64;
#pragma omp parallel for schedule(static) if (R * C >= 65536 && C >= 2 * kBlock)
    for (int64_t c0 = 0; c0 < C; c0 += kBlock) {
      const int64_t c1 = std::min(C, c0 + kBlock);
      double acc[kBlock] = {};
      if (c1 - c0 == kBlock) {  // a full block: the 64 sums in eight 8-double vectors (registers)
        using V8d = double __attribute__((vector_size(64)));
        V8d v0 = {}, v1 = {}, v2 = {}, v3 = {}, v4 = {}, v5 = {}, v6 = {}, v7 = {};
        // (by reference: a 64-byte vector returned by value is an ABI question without AVX-512)
        const auto add = [](V8d& v, const T* p) {
          for (int i = 0; i < 8; ++i) v[i] += double(p[i]);
        };
        for (int64_t r = 0; r < R; ++r) {
          const T* row = px + r * C + c0;
          add(v0, row), add(v1, row + 8), add(v2, row + 16), add(v3, row + 24);
          add(v4, row + 32), add(v5, row + 40), add(v6, row + 48), add(v7, row + 56);
        }
        const V8d v[8] = {v0, v1, v2, v3, v4, v5, v6, v7};
        for (int64_t c = 0; c < kBlock; ++c) acc[c] = v[c / 8][c % 8];
      } else {
        for (int64_t r = 0; r < R; ++r) {
          const T* row = px + r * C;
          for (int64_t c = c0; c < c1; ++c) acc[c - c0] += double(row[c]);
        }
      }
      for (int64_t c = c0; c < c1; ++c) po[c] = T(op == Reduce::Mean ? acc[c - c0] / double(R) : acc[c - c0]);
    }
  });
}

// One output element from the R contiguous values at p, accumulated in double.
template <typename T>
double reduce_run(Reduce op, const T* p, int64_t R, int64_t correction) {
  double acc = 0.0;
  switch (op) {
    case Reduce::Sum:
    case Reduce::Mean:
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < R; ++i) acc += double(p[i]);
      if (op == Reduce::Mean) acc /= double(R);
      break;
    case Reduce::Max:
      acc = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < R; ++i) acc = std::max(acc, double(p[i]));
      break;
    case Reduce::Min:
      acc = std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < R; ++i) acc = std::min(acc, double(p[i]));
      break;
    case Reduce::LogSumExp: {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < R; ++i) m = std::max(m, double(p[i]));
      if (std::isinf(m)) return m;
      for (int64_t i = 0; i < R; ++i) acc += std::exp(double(p[i]) - m);
      acc = m + std::log(acc);
      break;
    }
    case Reduce::Var: {
      double mean = 0.0;
#pragma omp simd reduction(+ : mean)
      for (int64_t i = 0; i < R; ++i) mean += double(p[i]);
      mean /= double(R);
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < R; ++i) acc += (double(p[i]) - mean) * (double(p[i]) - mean);
      acc /= double(std::max<int64_t>(R - correction, 0));
      break;
    }
  }
  return acc;
}

}  // namespace

// x: any shape; plan (check::reduce): x.permute(plan.order) is [rows, R] -> out plan.out_shape.
Tensor reduce(const ReducePlan& plan, Reduce op, const Tensor& x, int64_t correction) {
  const int64_t rows = plan.rows, R = plan.R;
  Tensor out = Tensor::empty(plan.out_shape, x.dtype());
  if ((op == Reduce::Sum || op == Reduce::Mean) && plan.leading && x.is_contiguous() && R > 0) {
    sum_leading(op, x, R, rows, out);
    return out;
  }
  Tensor xp = (x.dim() == 0 ? x : x.permute(plan.order)).contiguous();
  visit_float(x.dtype(), "reduce", [&]<typename T>() {
    const T* px = xp.data<T>();
    T* po = out.data<T>();
#pragma omp parallel for schedule(static) if (rows >= 16 && rows * R >= 32768)
    for (int64_t r = 0; r < rows; ++r) po[r] = T(reduce_run(op, px + r * R, R, correction));
  });
  return out;
}

}  // namespace relpos::k::cpu
