// kernels/cuda/optim.cpp — CUDA entry point of the fused Adam/AdamW step: the scalars from
// adam_scalars (kernels/cpu/optim.cpp), the element step of kernels/adam_math.h in optim.cu. sum_squares is in
// reduce.cpp.
#include <cmath>

#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const AdamStep& s) {
  const Tensor g_c = grad.contiguous();
  dev::adam_update(dt(param.dtype()), param.raw_data(), g_c.raw_data(), exp_avg.raw_data(), exp_avg_sq.raw_data(),
                   param.numel(), adam_scalars(s));
  param.bump_version();
  exp_avg.bump_version();
  exp_avg_sq.bump_version();
}

}  // namespace relpos::k::cuda
