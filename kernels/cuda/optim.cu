// kernels/cuda/optim.cu — the fused Adam/AdamW step: kernels/adam_math.h's element step, the
// CPU's own (kernels/cpu/optim.cpp); device code is compiled with --fmad=false
// (kernels/CMakeLists.txt) and IEEE sqrt/division (nvcc's defaults), so a step gives the same
// bits as the CPU.
#include "kernels/adam_math.h"
#include "kernels/cuda/common.cuh"

namespace relpos::k::cuda::dev {

namespace {

template <typename T>
__global__ void adam_kernel(T* p, const T* g, T* m, T* v, int64_t n, AdamCoeffs<T> c) {
  RELPOS_GRID_STRIDE(i, n) { adam_step(c, p[i], g[i], m[i], v[i]); }
}

}  // namespace

void adam_update(DT t, void* p, const void* g, void* m, void* v, int64_t n, const AdamScalars& s) {
  if (n == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    adam_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(m),
                                              static_cast<T*>(v), n, AdamCoeffs<T>(s));
  });
  RELPOS_LAUNCH_CHECK("adam_update");
}

}  // namespace relpos::k::cuda::dev
