// kernels/cuda/optim.cpp — CUDA entry point of the fused Adam/AdamW step (scalar preparation
// as kernels/cpu/optim.cpp; kernel in optim.cu). sum_squares is in
// reduce.cpp.
#include <cmath>

#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const AdamStep& s) {
  const Tensor g_c = grad.contiguous();
  // The double values the CPU rounds to T (same expressions).
  dev::AdamScalars a{};
  a.decay = 1.0 - s.lr * s.weight_decay;
  a.wd = s.weight_decay;
  a.b1 = s.beta1;
  a.one_m_b1 = 1.0 - s.beta1;
  a.b2 = s.beta2;
  a.one_m_b2 = 1.0 - s.beta2;
  a.sqrt_bc2 = std::sqrt(s.bias_correction2);
  a.eps = s.eps;
  a.neg_step = -(s.lr / s.bias_correction1);
  a.has_wd = s.weight_decay != 0.0;
  a.decoupled = s.decoupled;
  dev::adam_update(dt(param.dtype()), param.raw_data(), g_c.raw_data(), exp_avg.raw_data(), exp_avg_sq.raw_data(),
                   param.numel(), a);
  param.bump_version();
  exp_avg.bump_version();
  exp_avg_sq.bump_version();
}

}  // namespace relpos::k::cuda
