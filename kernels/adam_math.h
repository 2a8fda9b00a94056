// kernels/adam_math.h — the Adam / AdamW step of one element, the one definition that the CPU
// loop (kernels/cpu/optim.cpp) and the CUDA kernel (kernels/cuda/optim.cu) both run. Every
// scalar is rounded to T once, from the double values adam_scalars() makes, and the
// expressions run in this order in T; with contraction off on both sides (-ffp-contract=off for
// the CPU file, --fmad=false for device code: kernels/CMakeLists.txt) a step gives the same bits
// on every device. Plain C++ (no fmt, no Tensor): nvcc compiles it into device code.
#pragma once
#include <cmath>

#include "core/host_device.h"

namespace relpos::k {

// The step's scalars in double, made from the step's hyperparameters by adam_scalars.
struct AdamScalars {
  double decay, wd, b1, one_m_b1, b2, one_m_b2, sqrt_bc2, eps, neg_step;
  bool has_wd, decoupled;
};
struct AdamStep;                                // kernels/ops.h
AdamScalars adam_scalars(const AdamStep& step);  // kernels/cpu/optim.cpp (host code)

// The scalars rounded to T, as the unfused sequence of k:: ops rounded them.
template <typename T>
struct AdamCoeffs {
  T decay, wd, b1, one_m_b1, b2, one_m_b2, sqrt_bc2, eps, neg_step;
  bool has_wd, decoupled;
  RELPOS_HOST_DEVICE explicit AdamCoeffs(const AdamScalars& s)
      : decay(T(s.decay)), wd(T(s.wd)), b1(T(s.b1)), one_m_b1(T(s.one_m_b1)), b2(T(s.b2)), one_m_b2(T(s.one_m_b2)),
        sqrt_bc2(T(s.sqrt_bc2)), eps(T(s.eps)), neg_step(T(s.neg_step)), has_wd(s.has_wd), decoupled(s.decoupled) {}
};

// One element: p, m, v updated in place from the gradient g.
template <typename T>
RELPOS_HOST_DEVICE inline void adam_step(const AdamCoeffs<T>& c, T& p, T g, T& m, T& v) {
  T pi = p;
  if (c.has_wd) {
    if (c.decoupled) pi = pi * c.decay;  // p = p (1 - lr wd)
    else g = g + c.wd * pi;              // g = g + wd p
  }
  const T mi = m * c.b1 + c.one_m_b1 * g;
  const T vi = v * c.b2 + (g * c.one_m_b2) * g;
#if defined(__CUDA_ARCH__)
  const T root = sqrt(vi);
#else
  const T root = std::sqrt(vi);
#endif
  const T denom = root / c.sqrt_bc2 + c.eps;
  m = mi;
  v = vi;
  p = pi + (mi * c.neg_step) / denom;
}

}  // namespace relpos::k
