// kernels/cuda/norm.cpp — CUDA entry points of LayerNorm / RMSNorm forward and backward
// (arguments checked in kernels/checks.cpp; kernels in norm.cu).
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

namespace {

Shape row_shape(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 1); }

const void* ptr(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

NormOut forward(bool center, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  Tensor xc = x.contiguous();
  Tensor wc = weight.defined() ? weight.contiguous() : Tensor();
  Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  NormOut o{empty_cuda(x.shape(), x.dtype()), center ? zeros_cuda(row_shape(x), x.dtype()) : Tensor(),
            zeros_cuda(row_shape(x), x.dtype())};
  const int64_t D = xc.size(-1), rows = D == 0 ? 0 : xc.numel() / D;
  dev::norm_forward(dt(x.dtype()), center, xc.raw_data(), ptr(wc), ptr(bc), o.y.raw_data(),
                    center ? o.mean.raw_data() : nullptr, o.rstd.raw_data(), rows, D, eps);
  return o;
}

NormGrads backward(bool center, const Tensor& gy_in, const Tensor& x_in, const Tensor& mean_in, const Tensor& rstd_in,
                   const Tensor& w_in, bool has_bias) {
  Tensor gy = gy_in.contiguous(), x = x_in.contiguous(), rstd = rstd_in.contiguous();
  Tensor mean = center ? mean_in.contiguous() : Tensor();
  Tensor w = w_in.defined() ? w_in.contiguous() : Tensor();
  const int64_t D = x.size(-1), rows = D == 0 ? 0 : x.numel() / D;
  NormGrads g;
  g.dx = empty_cuda(x.shape(), x.dtype());
  const dev::DT t = dt(x.dtype());
  dev::norm_backward_dx(t, center, gy.raw_data(), x.raw_data(), ptr(mean), rstd.raw_data(), ptr(w), g.dx.raw_data(),
                        rows, D);
  if (w.defined() || has_bias) {
    if (w.defined()) g.dweight = empty_cuda({D}, x.dtype());
    if (has_bias) g.dbias = empty_cuda({D}, x.dtype());
    const int64_t chunks = std::max<int64_t>(dev::norm_chunks(rows), 1);  // float64 partial sums per row chunk
    Tensor pw = w.defined() ? empty_cuda({chunks, D}, DType::F64) : Tensor();
    Tensor pb = has_bias ? empty_cuda({chunks, D}, DType::F64) : Tensor();
    dev::norm_backward_params(t, center, gy.raw_data(), x.raw_data(), ptr(mean), rstd.raw_data(),
                              g.dweight.defined() ? g.dweight.raw_data() : nullptr,
                              g.dbias.defined() ? g.dbias.raw_data() : nullptr, rows, D,
                              pw.defined() ? pw.data<double>() : nullptr, pb.defined() ? pb.data<double>() : nullptr);
  }
  return g;
}

}  // namespace

NormOut layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  return forward(true, x, weight, bias, eps);
}

NormOut rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  return forward(false, x, weight, Tensor(), eps);
}

NormGrads layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                              const Tensor& weight, bool has_bias) {
  return backward(true, gy, x, mean, rstd, weight, has_bias);
}

NormGrads rms_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& rstd, const Tensor& weight) {
  return backward(false, gy, x, Tensor(), rstd, weight, false);
}

}  // namespace relpos::k::cuda
