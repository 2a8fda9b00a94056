// kernels/cpu/conv.cpp — depthwise 2D convolution on a channels-last grid (kernels/ops.h):
//   forward:  y[b, i, j, c] = bias[c] + sum_{u, v} w[c, u, v] * x[b, i + u - p, j + v - p, c]
//   backward: dx[b, i, j, c] = sum_{u, v} w[c, u, v] * gy[b, i - u + p, j - v + p, c]   (gather form)
//             dw[c, u, v] = sum_{b, i, j} gy[b, i, j, c] x[b, i + u - p, j + v - p, c]
//             dbias[c] = sum_{b, i, j} gy[b, i, j, c]
// with p = (K - 1) / 2 and zero padding. Each output element is one sum of kernels/conv_math.h,
// the definition kernels/cuda/conv.cu runs too, so both backends give the same bits.
#include "kernels/backend.h"
#include "kernels/conv_math.h"

namespace relpos::k::cpu {

namespace {

ConvDims conv_dims(const Tensor& x, const Tensor& w) {
  return {x.size(0), x.size(1), x.size(2), x.size(3), w.size(1)};
}

// Every [b, i, j, c] of the grid: out[.] = T(dwconv_gather(acc0(c), w, src, ., s)), rows in parallel.
template <typename T, typename Acc0>
void gather_all(T* out, const T* w, const T* src, const ConvDims& d, int64_t s, Acc0 acc0) {
#pragma omp parallel for schedule(static) if (d.B * d.H * d.W * d.C * d.K * d.K >= 65536)
  for (int64_t bi = 0; bi < d.B * d.H; ++bi) {
    const int64_t b = bi / d.H, i = bi % d.H;
    for (int64_t j = 0; j < d.W; ++j)
      for (int64_t c = 0; c < d.C; ++c) out[d.at(b, i, j, c)] = T(dwconv_gather(acc0(c), w, src, d, b, i, j, c, s));
  }
}

}  // namespace

Tensor depthwise_conv2d(const Tensor& x_in, const Tensor& w_in, const Tensor& bias_in) {
  const ConvDims d = conv_dims(x_in, w_in);
  const Tensor x = x_in.contiguous(), w = w_in.contiguous();
  const Tensor bias = bias_in.defined() ? bias_in.contiguous() : Tensor();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  visit_float(x.dtype(), "depthwise_conv2d", [&]<typename T>() {
    const T* pb = bias.defined() ? bias.data<T>() : nullptr;
    gather_all(out.data<T>(), w.data<T>(), x.data<T>(), d, 1, [pb](int64_t c) { return pb ? double(pb[c]) : 0.0; });
  });
  return out;
}

ConvGrads depthwise_conv2d_backward(const Tensor& gy_in, const Tensor& x_in, const Tensor& w_in, bool has_bias) {
  const ConvDims d = conv_dims(x_in, w_in);
  const Tensor gy = gy_in.contiguous(), x = x_in.contiguous(), w = w_in.contiguous();
  ConvGrads g;
  g.dx = Tensor::empty(x.shape(), x.dtype());
  g.dw = Tensor::empty(w.shape(), w.dtype());
  if (has_bias) g.dbias = Tensor::empty({d.C}, x.dtype());
  visit_float(x.dtype(), "depthwise_conv2d_backward", [&]<typename T>() {
    const T* pg = gy.data<T>();
    const T* px = x.data<T>();
    gather_all(g.dx.data<T>(), w.data<T>(), pg, d, -1, [](int64_t) { return 0.0; });
    T* pdw = g.dw.data<T>();
    const int64_t KK = d.K * d.K;
#pragma omp parallel for schedule(static) if (d.B * d.H * d.W * d.C * KK >= 65536)
    for (int64_t cuv = 0; cuv < d.C * KK; ++cuv)
      pdw[cuv] = T(dwconv_weight_grad(pg, px, d, cuv / KK, (cuv / d.K) % d.K, cuv % d.K));
    if (has_bias)
      for (int64_t c = 0; c < d.C; ++c) g.dbias.data<T>()[c] = T(dwconv_bias_grad(pg, d, c));
  });
  return g;
}

}  // namespace relpos::k::cpu
