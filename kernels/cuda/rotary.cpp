// kernels/cuda/rotary.cpp — CUDA entry point of rotary (validation as kernels/cpu/rotary.cpp;
// kernel in rotary.cu).
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

Tensor rotary(const Tensor& x_in, const Tensor& cs_in, bool interleaved, bool inverse) {
  check_defined(x_in, "rotary", "x");
  check_same_dtype_device(x_in, cs_in, "rotary");
  RELPOS_CHECK(x_in.dim() >= 2, "rotary: x must be [..., L, dh], got {}", shape_str(x_in.shape()));
  const int64_t L = x_in.size(-2), dh = x_in.size(-1);
  RELPOS_CHECK(cs_in.dim() == 3 && cs_in.size(0) == 2 && cs_in.size(1) == L && 2 * cs_in.size(2) <= dh,
               "rotary: cos/sin table must be [2, L, r/2] = [2, {}, <= {}] for x {}, got {}", L, dh / 2,
               shape_str(x_in.shape()), shape_str(cs_in.shape()));
  RELPOS_CHECK(is_floating(x_in.dtype()), "rotary: expected a floating dtype (float32 or float64), got {}",
               dtype_name(x_in.dtype()));
  const Tensor x = x_in.contiguous(), cs = cs_in.contiguous();
  Tensor out = empty_cuda(x.shape(), x.dtype());
  const int64_t N = (L == 0 || dh == 0) ? 0 : x.numel() / (L * dh);
  dev::rotary(dt(x.dtype()), out.raw_data(), x.raw_data(), cs.raw_data(), N, L, dh, cs.size(2), interleaved, inverse);
  return out;
}

}  // namespace relpos::k::cuda
