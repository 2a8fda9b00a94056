// kernels/cpu/optim.cpp — fused optimizer updates and the global-norm reduction they rely on.
#include <cmath>
#include <vector>

#include "kernels/backend.h"

namespace relpos::k::cpu {

// sum(x^2) in float64 over fixed chunks of 8192 elements, partial sums added in chunk order:
// the result does not depend on the thread count.
Tensor sum_squares(const Tensor& x_in) {
  const Tensor x = x_in.contiguous();
  constexpr int64_t kChunk = 8192;
  const int64_t n = x.numel(), chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(size_t(chunks), 0.0);
  visit_float(x.dtype(), "sum_squares", [&]<typename T>() {
    const T* p = x.data<T>();
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (int64_t c = 0; c < chunks; ++c) {
      double acc = 0.0;
      const int64_t end = std::min(n, (c + 1) * kChunk);
#pragma omp simd reduction(+ : acc)
      for (int64_t i = c * kChunk; i < end; ++i) acc += double(p[i]) * double(p[i]);
      part[size_t(c)] = acc;
    }
  });
  double total = 0.0;
  for (double v : part) total += v;
  return Tensor::scalar(total, DType::F64);
}

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const AdamStep& s) {
  const Tensor g_c = grad.contiguous();
  visit_float(param.dtype(), "adam_update", [&]<typename T>() {
    T* p = param.data<T>();
    T* m = exp_avg.data<T>();
    T* v = exp_avg_sq.data<T>();
    const T* g = g_c.data<T>();
    const int64_t n = param.numel();
    // Scalars rounded to T exactly as the unfused sequence of k:: ops rounded them.
    const T decay = T(1.0 - s.lr * s.weight_decay), wd = T(s.weight_decay);
    const T b1 = T(s.beta1), one_m_b1 = T(1.0 - s.beta1), b2 = T(s.beta2), one_m_b2 = T(1.0 - s.beta2);
    const T sqrt_bc2 = T(std::sqrt(s.bias_correction2)), eps = T(s.eps), neg_step = T(-(s.lr / s.bias_correction1));
    const bool has_wd = s.weight_decay != 0.0, decoupled = s.decoupled;
#pragma omp parallel for schedule(static) if (n >= 32768)
    for (int64_t i = 0; i < n; ++i) {
      T gi = g[i], pi = p[i];
      if (has_wd) {
        if (decoupled) pi = pi * decay;  // p = p (1 - lr wd)
        else gi = gi + wd * pi;          // g = g + wd p
      }
      const T mi = m[i] * b1 + one_m_b1 * gi;
      const T vi = v[i] * b2 + (gi * one_m_b2) * gi;
      const T denom = std::sqrt(vi) / sqrt_bc2 + eps;
      m[i] = mi;
      v[i] = vi;
      p[i] = pi + (mi * neg_step) / denom;
    }
  });
  param.bump_version();
  exp_avg.bump_version();
  exp_avg_sq.bump_version();
}

}  // namespace relpos::k::cpu
