// kernels/cuda/rotary.cpp — CUDA entry point of rotary (arguments checked in
// kernels/checks.cpp; kernel in rotary.cu).
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

Tensor rotary(const Tensor& x_in, const Tensor& cs_in, bool interleaved, bool inverse) {
  const int64_t L = x_in.size(-2), dh = x_in.size(-1);
  const Tensor x = x_in.contiguous(), cs = cs_in.contiguous();
  Tensor out = empty_cuda(x.shape(), x.dtype());
  const int64_t N = (L == 0 || dh == 0) ? 0 : x.numel() / (L * dh);
  dev::rotary(dt(x.dtype()), out.raw_data(), x.raw_data(), cs.raw_data(), N, L, dh, cs.size(2), interleaved, inverse);
  return out;
}

}  // namespace relpos::k::cuda
