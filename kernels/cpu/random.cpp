// kernels/cpu/random.cpp — dropout masks from a seeded Generator (serial draws, so the
// mask depends only on the generator state, never on the thread count).
#include "kernels/ops.h"

namespace relpos::k {

Tensor dropout_mask(const Shape& shape, double p, Generator& gen, DType dtype) {
  RELPOS_CHECK(p >= 0.0 && p < 1.0, "dropout: p must be in [0, 1), got {}", p);
  Tensor m = Tensor::empty(shape, dtype);
  visit_float(dtype, "dropout", [&]<typename T>() {
    T* pm = m.data<T>();
    const T keep = T(1.0 / (1.0 - p));
    for (int64_t i = 0; i < m.numel(); ++i) pm[i] = gen.uniform() < p ? T(0) : keep;
  });
  return m;
}

}  // namespace relpos::k
