// kernels/cuda/random.cpp — CUDA entry point of dropout_mask (kernel in random.cu).
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

Tensor dropout_mask(const Shape& shape, double p, Generator& gen, DType dtype) {
  Tensor m = empty_cuda(shape, dtype);
  const int64_t n = m.numel();
  const uint64_t seed = gen.state().seed, first = gen.advance(uint64_t(n));  // same draws as the CPU
  dev::dropout_mask(dt(dtype), m.raw_data(), n, p, seed, first);
  return m;
}

}  // namespace relpos::k::cuda
