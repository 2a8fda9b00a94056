// kernels/cuda/random.cu — dropout masks: element i uses counter-based draw first + i of the
// generator (core/rng.h, the same host/device function kernels/cpu/random.cpp calls), so the
// mask equals the CPU's for the same seed and offset.
#include "core/rng.h"
#include "kernels/cuda/common.cuh"

namespace relpos::k::cuda::dev {

namespace {

template <typename T>
__global__ void dropout_kernel(T* out, int64_t n, double p, T keep, uint64_t seed, uint64_t first) {
  RELPOS_GRID_STRIDE(i, n) out[i] = rng_uniform(seed, first + uint64_t(i)) < p ? T(0) : keep;
}

}  // namespace

void dropout_mask(DT t, void* out, int64_t n, double p, uint64_t seed, uint64_t first) {
  if (n == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    dropout_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(out), n, p, T(1.0 / (1.0 - p)), seed, first);
  });
  RELPOS_LAUNCH_CHECK("dropout");
}

}  // namespace relpos::k::cuda::dev
