// kernels/cpu/rotary.cpp — rotary position encoding as one pass (kernels/ops.h):
//   row (n, m) of x [N, L, dh]: (a, b) -> (a c - b s, a s + b c) for each pair p < half,
//   c = cs[0, m, p], s = cs[1, m, p] (s negated for the inverse), channels >= 2 half copied.
// Pairs are (p, p + half) (half style) or (2p, 2p + 1) (interleaved). Rows are independent,
// so any thread count gives the same bits.
#include "kernels/backend.h"

namespace relpos::k::cpu {

Tensor rotary(const Tensor& x_in, const Tensor& cs_in, bool interleaved, bool inverse) {
  const int64_t L = x_in.size(-2), dh = x_in.size(-1);
  const Tensor x = x_in.contiguous(), cs = cs_in.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const int64_t half = cs.size(2), rows = L == 0 ? 0 : x.numel() / (L * std::max<int64_t>(dh, 1));
  visit_float(x.dtype(), "rotary", [&]<typename T>() {
    const T* px = x.data<T>();
    const T* pc = cs.data<T>();
    T* po = out.data<T>();
    const T sign = inverse ? T(-1) : T(1);
#pragma omp parallel for schedule(static) if (rows * dh >= 32768)
    for (int64_t row = 0; row < rows * L; ++row) {
      const int64_t m = row % L;
      const T* xr = px + row * dh;
      T* yr = po + row * dh;
      const T* c = pc + m * half;
      const T* s = pc + (L + m) * half;
      if (interleaved) {
        for (int64_t p = 0; p < half; ++p) {
          const T a = xr[2 * p], b = xr[2 * p + 1], sp = sign * s[p];
          yr[2 * p] = a * c[p] - b * sp;
          yr[2 * p + 1] = a * sp + b * c[p];
        }
      } else {
#pragma omp simd
        for (int64_t p = 0; p < half; ++p) {
          const T a = xr[p], b = xr[p + half], sp = sign * s[p];
          yr[p] = a * c[p] - b * sp;
          yr[p + half] = a * sp + b * c[p];
        }
      }
      for (int64_t e = 2 * half; e < dh; ++e) yr[e] = xr[e];
    }
  });
  return out;
}

}  // namespace relpos::k::cpu
