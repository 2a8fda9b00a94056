// kernels/cpu/softmax.cpp — softmax / log_softmax along one dim, forward and backward.
// The dim is moved last (a copy only if needed), then each row is done in one sweep for
// the max, one for the sum of exponentials and one to write the result.
#include <cmath>
#include <limits>

#include "kernels/cpu/fast_math.h"
#include "kernels/backend.h"

namespace relpos::k::cpu {

namespace {

// Apply row_fn(rows..., n) over rows of the given tensors with the plan's dim moved last.
// Returns the result with dim moved back to its place (contiguous).
template <typename F>
Tensor rowwise(const RowsPlan& plan, const std::vector<Tensor>& ins, const char* op, F&& row_fn) {
  const Tensor& x0 = ins[0];
  const int64_t dim = plan.dim, last = plan.last, n = plan.n, rows = plan.rows;
  std::vector<Tensor> cs;
  for (const Tensor& t : ins) {
    cs.push_back((x0.dim() == 0 ? t : t.transpose(dim, last)).contiguous());
  }
  Tensor out = Tensor::empty(cs[0].shape(), x0.dtype());
  visit_float(x0.dtype(), op, [&]<typename T>() {
    T* po = out.data<T>();
#pragma omp parallel for schedule(static) if (rows >= 8 && rows * n >= 16384)
    for (int64_t r = 0; r < rows; ++r) {
      const T* a = cs[0].data<T>() + r * n;
      const T* b = cs.size() > 1 ? cs[1].data<T>() + r * n : nullptr;
      row_fn(a, b, po + r * n, n);
    }
  });
  return x0.dim() == 0 ? out : out.transpose(dim, last).contiguous();
}

}  // namespace

Tensor softmax(const RowsPlan& plan, const Tensor& x) {
  return rowwise(plan, {x}, "softmax", []<typename T>(const T* a, const T*, T* o, int64_t n) {
    T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t i = 0; i < n; ++i) m = a[i] > m ? a[i] : m;
    m = fast::simd_max_fixup(m, a, n);
    if (std::isinf(m) && m < 0) {  // fully masked row: define as zeros, not NaN
      for (int64_t i = 0; i < n; ++i) o[i] = T(0);
      return;
    }
    double s = 0.0;
    if constexpr (std::is_same_v<T, float>) {
      const float* __restrict in = a;  // rows never alias (out is a fresh tensor)
      float* __restrict out = o;
      float sf = 0.0f;  // lane-wise float partial sums: the order is fixed, so results are deterministic
#pragma omp simd reduction(+ : sf)
      for (int64_t i = 0; i < n; ++i) {
        const float e = fast::exp_f32(in[i] - m);
        out[i] = e;
        sf += e;
      }
      s = sf;
    } else {
      for (int64_t i = 0; i < n; ++i) {
        o[i] = std::exp(a[i] - m);
        s += double(o[i]);
      }
    }
    const T inv = T(1.0 / s);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] *= inv;
  });
}

Tensor log_softmax(const RowsPlan& plan, const Tensor& x) {
  return rowwise(plan, {x}, "log_softmax", []<typename T>(const T* a, const T*, T* o, int64_t n) {
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t i = 0; i < n; ++i) m = a[i] > m ? a[i] : m;
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(double(a[i] - m));
    const T lse = T(double(m) + std::log(s));
    for (int64_t i = 0; i < n; ++i) o[i] = a[i] - lse;
  });
}

// dx = y * (gy - sum(gy * y))  (float rows vectorise: the dot product accumulates in double)
Tensor softmax_backward(const RowsPlan& plan, const Tensor& y, const Tensor& gy) {
  return rowwise(plan, {y, gy}, "softmax_backward", []<typename T>(const T* yy, const T* g, T* o, int64_t n) {
    double dot = 0.0;
#pragma omp simd reduction(+ : dot)
    for (int64_t i = 0; i < n; ++i) dot += double(yy[i]) * double(g[i]);
    const T d = T(dot);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = yy[i] * (g[i] - d);
  });
}

// dx = gy - exp(y) * sum(gy)
Tensor log_softmax_backward(const RowsPlan& plan, const Tensor& y, const Tensor& gy) {
  return rowwise(plan, {y, gy}, "log_softmax_backward", []<typename T>(const T* yy, const T* g, T* o, int64_t n) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += double(g[i]);
    const T st = T(s);
    for (int64_t i = 0; i < n; ++i) o[i] = g[i] - std::exp(yy[i]) * st;
  });
}

}  // namespace relpos::k::cpu
