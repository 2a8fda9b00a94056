// kernels/cpu/masking.cpp — the causal mask as a predicate: key position k_offset + j is
// hidden from query position q_offset + i when k_offset + j > q_offset + i. No mask tensor.
#include <algorithm>

#include "kernels/backend.h"

namespace relpos::k::cpu {

// x: [..., Lq, Lk] -> fresh contiguous copy with the hidden cells set to value.
Tensor causal_fill(const Tensor& x_in, int64_t q_offset, int64_t k_offset, double value) {
  const Tensor x = x_in.contiguous();
  const int64_t Lq = x.size(-2), Lk = x.size(-1);
  const int64_t rows = x.numel() / std::max<int64_t>(Lk, 1);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  visit_float(x.dtype(), "causal_fill", [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const T v = T(value);
#pragma omp parallel for schedule(static) if (x.numel() >= 32768)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % Lq;
      // visible keys: j <= q_offset + i - k_offset
      const int64_t visible = std::clamp<int64_t>(q_offset + i - k_offset + 1, 0, Lk);
      const T* a = px + r * Lk;
      T* o = po + r * Lk;
      std::copy(a, a + visible, o);
      std::fill(o + visible, o + Lk, v);
    }
  });
  return out;
}

}  // namespace relpos::k::cpu
