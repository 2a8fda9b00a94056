// kernels/cuda/conv.cpp — CUDA entry points of depthwise_conv2d and its backward (arguments
// checked in kernels/checks.cpp; kernels in conv.cu).
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

Tensor depthwise_conv2d(const Tensor& x_in, const Tensor& w_in, const Tensor& bias_in) {
  const int64_t B = x_in.size(0), H = x_in.size(1), W = x_in.size(2), C = x_in.size(3), K = w_in.size(1);
  const Tensor x = x_in.contiguous(), w = w_in.contiguous();
  const Tensor bias = bias_in.defined() ? bias_in.contiguous() : Tensor();
  Tensor out = empty_cuda(x.shape(), x.dtype());
  dev::depthwise_conv2d(dt(x.dtype()), out.raw_data(), x.raw_data(), w.raw_data(),
                        bias.defined() ? bias.raw_data() : nullptr, B, H, W, C, K);
  return out;
}

ConvGrads depthwise_conv2d_backward(const Tensor& gy_in, const Tensor& x_in, const Tensor& w_in, bool has_bias) {
  const int64_t B = x_in.size(0), H = x_in.size(1), W = x_in.size(2), C = x_in.size(3), K = w_in.size(1);
  const Tensor gy = gy_in.contiguous(), x = x_in.contiguous(), w = w_in.contiguous();
  ConvGrads g;
  g.dx = empty_cuda(x.shape(), x.dtype());
  g.dw = empty_cuda(w.shape(), w.dtype());
  if (has_bias) g.dbias = empty_cuda({C}, x.dtype());
  dev::depthwise_conv2d_backward(dt(x.dtype()), g.dx.raw_data(), g.dw.raw_data(),
                                 has_bias ? g.dbias.raw_data() : nullptr, gy.raw_data(), x.raw_data(), w.raw_data(), B,
                                 H, W, C, K);
  return g;
}

}  // namespace relpos::k::cuda
