// kernels/cuda/random.cpp — CUDA entry point of dropout_mask (kernel in random.cu).
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

Tensor dropout_mask(const Shape& shape, double p, Generator& gen, DType dtype) {
  RELPOS_CHECK(p >= 0.0 && p < 1.0, "dropout: p must be in [0, 1), got {}", p);
  RELPOS_CHECK(is_floating(dtype), "dropout: expected a floating dtype (float32 or float64), got {}",
               dtype_name(dtype));
  Tensor m = empty_cuda(shape, dtype);
  const int64_t n = m.numel();
  const uint64_t seed = gen.state().seed, first = gen.advance(uint64_t(n));  // same draws as the CPU
  dev::dropout_mask(dt(dtype), m.raw_data(), n, p, seed, first);
  return m;
}

}  // namespace relpos::k::cuda
