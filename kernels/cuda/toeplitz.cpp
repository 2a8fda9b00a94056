// kernels/cuda/toeplitz.cpp — CUDA entry points of toeplitz_add and toeplitz_diag_sum
// (validation as kernels/cpu/toeplitz.cpp; kernels in toeplitz.cu).
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

Tensor toeplitz_add(const Tensor& s_in, const Tensor& t_in) {
  check_same_dtype_device(s_in, t_in, "toeplitz_add");
  RELPOS_CHECK(s_in.dim() == 4, "toeplitz_add: scores must be [B, H, Lq, Lk], got {}", shape_str(s_in.shape()));
  const int64_t B = s_in.size(0), H = s_in.size(1), Lq = s_in.size(2), Lk = s_in.size(3);
  RELPOS_CHECK(t_in.dim() == 2 && t_in.size(0) == H && t_in.size(1) == Lq + Lk - 1,
               "toeplitz_add: bias must be [H, Lq + Lk - 1] = [{}, {}] for scores {}, got {}", H, Lq + Lk - 1,
               shape_str(s_in.shape()), shape_str(t_in.shape()));
  RELPOS_CHECK(is_floating(s_in.dtype()), "toeplitz_add: expected a floating dtype (float32 or float64), got {}",
               dtype_name(s_in.dtype()));
  Tensor s = s_in.contiguous(), t = t_in.contiguous();
  Tensor out = empty_cuda(s.shape(), s.dtype());
  dev::toeplitz_add(dt(s.dtype()), out.raw_data(), s.raw_data(), t.raw_data(), B, H, Lq, Lk);
  return out;
}

Tensor toeplitz_diag_sum(const Tensor& ds_in) {
  check_defined(ds_in, "toeplitz_diag_sum", "gradient");
  RELPOS_CHECK(ds_in.dim() == 4, "toeplitz_diag_sum: expected [B, H, Lq, Lk], got {}", shape_str(ds_in.shape()));
  RELPOS_CHECK(is_floating(ds_in.dtype()), "toeplitz_diag_sum: expected a floating dtype (float32 or float64), got {}",
               dtype_name(ds_in.dtype()));
  const int64_t B = ds_in.size(0), H = ds_in.size(1), Lq = ds_in.size(2), Lk = ds_in.size(3);
  Tensor ds = ds_in.contiguous();
  Tensor out = zeros_cuda({H, Lq + Lk - 1}, ds.dtype());
  dev::toeplitz_diag_sum(dt(ds.dtype()), out.raw_data(), ds.raw_data(), B, H, Lq, Lk);
  return out;
}

}  // namespace relpos::k::cuda
