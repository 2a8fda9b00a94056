// kernels/cpu/random.cpp — dropout masks from a seeded Generator. Element i uses draw
// offset + i (rng_uniform), so the mask depends only on the generator state — not on the
// thread count or the device (kernels/cuda/random.cu computes the same draws).
#include "kernels/backend.h"

namespace relpos::k::cpu {

Tensor dropout_mask(const Shape& shape, double p, Generator& gen, DType dtype) {
  Tensor m = Tensor::empty(shape, dtype);
  visit_float(dtype, "dropout", [&]<typename T>() {
    T* pm = m.data<T>();
    const T keep = T(1.0 / (1.0 - p));
    const int64_t n = m.numel();
    const uint64_t seed = gen.state().seed, first = gen.advance(uint64_t(n));
#pragma omp parallel for schedule(static) if (n >= 32768)
    for (int64_t i = 0; i < n; ++i) pm[i] = rng_uniform(seed, first + uint64_t(i)) < p ? T(0) : keep;
  });
  return m;
}

}  // namespace relpos::k::cpu
