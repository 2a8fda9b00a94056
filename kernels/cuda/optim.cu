// kernels/cuda/optim.cu — the fused Adam/AdamW step. The expressions, their order and the
// rounding of every scalar to T are those of kernels/cpu/optim.cpp; device code is compiled
// with --fmad=false (kernels/CMakeLists.txt) and IEEE sqrt/division (nvcc's defaults), so a
// step gives the same bits as the CPU.
#include <cmath>

#include "kernels/cuda/common.cuh"

namespace relpos::k::cuda::dev {

namespace {

template <typename T>
__global__ void adam_kernel(T* p, const T* g, T* m, T* v, int64_t n, T decay, T wd, T b1, T one_m_b1, T b2, T one_m_b2,
                            T sqrt_bc2, T eps, T neg_step, bool has_wd, bool decoupled) {
  RELPOS_GRID_STRIDE(i, n) {
    T gi = g[i], pi = p[i];
    if (has_wd) {
      if (decoupled) pi = pi * decay;  // p = p (1 - lr wd)
      else gi = gi + wd * pi;          // g = g + wd p
    }
    const T mi = m[i] * b1 + one_m_b1 * gi;
    const T vi = v[i] * b2 + (gi * one_m_b2) * gi;
    const T denom = sqrt(vi) / sqrt_bc2 + eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi + (mi * neg_step) / denom;
  }
}

}  // namespace

void adam_update(DT t, void* p, const void* g, void* m, void* v, int64_t n, const AdamScalars& s) {
  if (n == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    adam_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(m),
                                              static_cast<T*>(v), n, T(s.decay), T(s.wd), T(s.b1), T(s.one_m_b1),
                                              T(s.b2), T(s.one_m_b2), T(s.sqrt_bc2), T(s.eps), T(s.neg_step),
                                              s.has_wd, s.decoupled);
  });
  RELPOS_LAUNCH_CHECK("adam_update");
}

}  // namespace relpos::k::cuda::dev
