// kernels/cpu/toeplitz.cpp — additive biases that depend only on the distance kj - qi,
// stored in Toeplitz form T: [H, Lq + Lk - 1] with T[h, j - i + Lq - 1] the bias of query
// row i and key column j. The [H, Lq, Lk] bias is never materialised:
//   forward:  S'[b, h, i, j] = S[b, h, i, j] + T[h, j - i + Lq - 1]
//   backward: dT[h, t] = sum_b sum_{j - i + Lq - 1 = t} dS[b, h, i, j]
// The backward walks each diagonal in a fixed order (b, then i), so it is deterministic; one
// thread owns each head.
#include "kernels/backend.h"

namespace relpos::k::cpu {

Tensor toeplitz_add(const Tensor& s_in, const Tensor& t_in) {
  const int64_t B = s_in.size(0), H = s_in.size(1), Lq = s_in.size(2), Lk = s_in.size(3);
  Tensor s = s_in.contiguous(), t = t_in.contiguous();
  Tensor out = Tensor::empty(s.shape(), s.dtype());
  visit_float(s.dtype(), "toeplitz_add", [&]<typename T>() {
    const T* ps = s.data<T>();
    const T* pt = t.data<T>();
    T* po = out.data<T>();
#pragma omp parallel for schedule(static) if (B * H * Lq * Lk >= 32768)
    for (int64_t bh = 0; bh < B * H; ++bh) {
      const T* th = pt + (bh % H) * (Lq + Lk - 1);
      for (int64_t i = 0; i < Lq; ++i) {
        const T* row_bias = th + (Lq - 1 - i);  // row_bias[j] = T[h, j - i + Lq - 1]
        const T* si = ps + (bh * Lq + i) * Lk;
        T* oi = po + (bh * Lq + i) * Lk;
        for (int64_t j = 0; j < Lk; ++j) oi[j] = si[j] + row_bias[j];
      }
    }
  });
  return out;
}

Tensor toeplitz_diag_sum(const Tensor& ds_in) {
  const int64_t B = ds_in.size(0), H = ds_in.size(1), Lq = ds_in.size(2), Lk = ds_in.size(3);
  Tensor ds = ds_in.contiguous();
  Tensor out = Tensor::zeros({H, Lq + Lk - 1}, ds.dtype());
  visit_float(ds.dtype(), "toeplitz_diag_sum", [&]<typename T>() {
    const T* pd = ds.data<T>();
    T* po = out.data<T>();
#pragma omp parallel for schedule(static) if (H > 1 && B * H * Lq * Lk >= 32768)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> acc(size_t(Lq + Lk - 1), 0.0);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < Lq; ++i) {
          const T* di = pd + ((b * H + h) * Lq + i) * Lk;
          double* a = acc.data() + (Lq - 1 - i);
          for (int64_t j = 0; j < Lk; ++j) a[j] += double(di[j]);
        }
      for (int64_t t = 0; t < Lq + Lk - 1; ++t) po[h * (Lq + Lk - 1) + t] = T(acc[size_t(t)]);
    }
  });
  return out;
}

}  // namespace relpos::k::cpu
