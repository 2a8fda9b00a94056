// kernels/cuda/toeplitz.cpp — CUDA entry points of toeplitz_add and toeplitz_diag_sum
// (arguments checked in kernels/checks.cpp; kernels in toeplitz.cu).
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

Tensor toeplitz_add(const Tensor& s_in, const Tensor& t_in) {
  const int64_t B = s_in.size(0), H = s_in.size(1), Lq = s_in.size(2), Lk = s_in.size(3);
  Tensor s = s_in.contiguous(), t = t_in.contiguous();
  Tensor out = empty_cuda(s.shape(), s.dtype());
  dev::toeplitz_add(dt(s.dtype()), out.raw_data(), s.raw_data(), t.raw_data(), B, H, Lq, Lk);
  return out;
}

Tensor toeplitz_diag_sum(const Tensor& ds_in) {
  const int64_t B = ds_in.size(0), H = ds_in.size(1), Lq = ds_in.size(2), Lk = ds_in.size(3);
  Tensor ds = ds_in.contiguous();
  Tensor out = zeros_cuda({H, Lq + Lk - 1}, ds.dtype());
  dev::toeplitz_diag_sum(dt(ds.dtype()), out.raw_data(), ds.raw_data(), B, H, Lq, Lk);
  return out;
}

}  // namespace relpos::k::cuda
