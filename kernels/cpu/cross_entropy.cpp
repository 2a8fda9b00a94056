// kernels/cpu/cross_entropy.cpp — fused log-softmax + NLL.
//   loss_n = lse(logits_n) - logits_n[target_n]  (0 for target_n == ignore_index)
//   mean: sum_n loss_n / count (count = rows not ignored), sum: sum_n loss_n, none: [N]
// Backward: dlogits_n = g_n * (softmax(logits_n) - onehot(target_n)), g_n = g / count for
// mean; ignored rows get 0.
// Both in float64 arithmetic per row. exp: libm's for float64 logits (gradchecks), the
// vectorisable fast::exp_f64 (within 3e-16 of it) for float32 ones, whose results are rounded to
// float32 anyway: libm's scalar exp was ~3% of a tiny model's step (bench/RESULTS.md).
#include <cmath>
#include <limits>

#include "kernels/backend.h"
#include "kernels/cpu/fast_math.h"

namespace relpos::k::cpu {

namespace {

template <typename T>
double exp64(double x) {
  if constexpr (std::is_same_v<T, float>) return fast::exp_f64(x);
  else return std::exp(x);
}

}  // namespace

CrossEntropyOut cross_entropy(const Tensor& logits_in, const Tensor& target, int64_t ignore_index,
                              Reduction reduction) {
  Tensor logits = logits_in.contiguous();
  const int64_t N = logits.size(0), C = logits.size(1);
  std::vector<int64_t> tg = target.to_vector<int64_t>();
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (tg[n] == ignore_index) continue;
    RELPOS_CHECK(tg[n] >= 0 && tg[n] < C, "cross_entropy: target {} at row {} out of range [0, {})",
                 tg[n], n, C);
    ++count;
  }
  CrossEntropyOut out{Tensor(), Tensor::empty({N}, logits.dtype()), count};
  Tensor per_row = Tensor::empty({N}, logits.dtype());
  visit_float(logits.dtype(), "cross_entropy", [&]<typename T>() {
    const T* pl = logits.data<T>();
    T* plse = out.lse.data<T>();
    T* pr = per_row.data<T>();
#pragma omp parallel for schedule(static) if (N * C >= 32768)
    for (int64_t n = 0; n < N; ++n) {
      const T* row = pl + n * C;
      double m = -std::numeric_limits<double>::infinity();
#pragma omp simd reduction(max : m)
      for (int64_t c = 0; c < C; ++c) m = std::max(m, double(row[c]));
      double s = 0.0;
#pragma omp simd reduction(+ : s)
      for (int64_t c = 0; c < C; ++c) s += exp64<T>(double(row[c]) - m);
      double lse = m + std::log(s);
      plse[n] = T(lse);
      pr[n] = tg[n] == ignore_index ? T(0) : T(lse - double(row[tg[n]]));
    }
  });
  if (reduction == Reduction::None) {
    out.loss = per_row;
  } else {
    double total = 0.0;
    for (double v : per_row.to_vector<double>()) total += v;
    if (reduction == Reduction::Mean) total = count == 0 ? 0.0 : total / double(count);
    out.loss = Tensor::scalar(total, logits.dtype());
  }
  return out;
}

Tensor cross_entropy_backward(const Tensor& g, const Tensor& logits_in, const Tensor& lse, const Tensor& target,
                              int64_t ignore_index, Reduction reduction, int64_t count) {
  Tensor logits = logits_in.contiguous();
  const int64_t N = logits.size(0), C = logits.size(1);
  std::vector<int64_t> tg = target.to_vector<int64_t>();
  std::vector<double> gv = g.to_vector<double>();
  Tensor dx = Tensor::empty({N, C}, logits.dtype());
  visit_float(logits.dtype(), "cross_entropy_backward", [&]<typename T>() {
    const T* pl = logits.data<T>();
    const T* plse = lse.data<T>();
    T* pd = dx.data<T>();
#pragma omp parallel for schedule(static) if (N * C >= 32768)
    for (int64_t n = 0; n < N; ++n) {
      T* drow = pd + n * C;
      if (tg[n] == ignore_index) {
        for (int64_t c = 0; c < C; ++c) drow[c] = T(0);
        continue;
      }
      double scale = reduction == Reduction::None ? gv[n]
                     : reduction == Reduction::Mean ? gv[0] / double(count)
                                                    : gv[0];
      const T* row = pl + n * C;
      const double l = double(plse[n]);
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) drow[c] = T(scale * exp64<T>(double(row[c]) - l));
      drow[tg[n]] -= T(scale);
    }
  });
  return dx;
}

}  // namespace relpos::k::cpu
