// kernels/cpu/conv.cpp — depthwise 2D convolution on a channels-last grid (kernels/ops.h):
//   forward:  y[b, i, j, c] = bias[c] + sum_{u, v} w[c, u, v] * x[b, i + u - p, j + v - p, c]
//   backward: dx[b, i, j, c] = sum_{u, v} w[c, u, v] * gy[b, i - u + p, j - v + p, c]   (gather form)
//             dw[c, u, v] = sum_{b, i, j} gy[b, i, j, c] x[b, i + u - p, j + v - p, c]
//             dbias[c] = sum_{b, i, j} gy[b, i, j, c]
// with p = (k - 1) / 2 and zero padding (terms outside the grid are left out). Every output
// element is accumulated in a fixed order (u, then v; or b, i, j) in float64 and rounded once,
// the order kernels/cuda/conv.cu uses, so both backends give the same bits.
#include <vector>

#include "kernels/backend.h"

namespace relpos::k::cpu {

Tensor depthwise_conv2d(const Tensor& x_in, const Tensor& w_in, const Tensor& bias_in) {
  const int64_t B = x_in.size(0), H = x_in.size(1), W = x_in.size(2), C = x_in.size(3), K = w_in.size(1);
  const int64_t p = (K - 1) / 2;
  const Tensor x = x_in.contiguous(), w = w_in.contiguous();
  const Tensor bias = bias_in.defined() ? bias_in.contiguous() : Tensor();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  visit_float(x.dtype(), "depthwise_conv2d", [&]<typename T>() {
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    const T* pb = bias.defined() ? bias.data<T>() : nullptr;
    T* po = out.data<T>();
#pragma omp parallel for schedule(static) if (B * H * W * C * K * K >= 65536)
    for (int64_t bi = 0; bi < B * H; ++bi) {
      const int64_t b = bi / H, i = bi % H;
      for (int64_t j = 0; j < W; ++j)
        for (int64_t c = 0; c < C; ++c) {
          double acc = pb ? double(pb[c]) : 0.0;
          for (int64_t u = 0; u < K; ++u) {
            const int64_t r = i + u - p;
            if (r < 0 || r >= H) continue;
            for (int64_t v = 0; v < K; ++v) {
              const int64_t s = j + v - p;
              if (s < 0 || s >= W) continue;
              acc += double(pw[(c * K + u) * K + v]) * double(px[((b * H + r) * W + s) * C + c]);
            }
          }
          po[((b * H + i) * W + j) * C + c] = T(acc);
        }
    }
  });
  return out;
}

ConvGrads depthwise_conv2d_backward(const Tensor& gy_in, const Tensor& x_in, const Tensor& w_in, bool has_bias) {
  const int64_t B = x_in.size(0), H = x_in.size(1), W = x_in.size(2), C = x_in.size(3), K = w_in.size(1);
  const int64_t p = (K - 1) / 2;
  const Tensor gy = gy_in.contiguous(), x = x_in.contiguous(), w = w_in.contiguous();
  ConvGrads g;
  g.dx = Tensor::empty(x.shape(), x.dtype());
  g.dw = Tensor::empty(w.shape(), w.dtype());
  if (has_bias) g.dbias = Tensor::empty({C}, x.dtype());
  visit_float(x.dtype(), "depthwise_conv2d_backward", [&]<typename T>() {
    const T* pg = gy.data<T>();
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    T* pdx = g.dx.data<T>();
    T* pdw = g.dw.data<T>();
    T* pdb = has_bias ? g.dbias.data<T>() : nullptr;
#pragma omp parallel for schedule(static) if (B * H * W * C * K * K >= 65536)
    for (int64_t bi = 0; bi < B * H; ++bi) {
      const int64_t b = bi / H, i = bi % H;
      for (int64_t j = 0; j < W; ++j)
        for (int64_t c = 0; c < C; ++c) {
          double acc = 0.0;
          for (int64_t u = 0; u < K; ++u) {
            const int64_t r = i - u + p;
            if (r < 0 || r >= H) continue;
            for (int64_t v = 0; v < K; ++v) {
              const int64_t s = j - v + p;
              if (s < 0 || s >= W) continue;
              acc += double(pw[(c * K + u) * K + v]) * double(pg[((b * H + r) * W + s) * C + c]);
            }
          }
          pdx[((b * H + i) * W + j) * C + c] = T(acc);
        }
    }
#pragma omp parallel for schedule(static) if (B * H * W * C * K * K >= 65536)
    for (int64_t cuv = 0; cuv < C * K * K; ++cuv) {
      const int64_t c = cuv / (K * K), u = (cuv / K) % K, v = cuv % K;
      double acc = 0.0;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < H; ++i) {
          const int64_t r = i + u - p;
          if (r < 0 || r >= H) continue;
          for (int64_t j = 0; j < W; ++j) {
            const int64_t s = j + v - p;
            if (s < 0 || s >= W) continue;
            acc += double(pg[((b * H + i) * W + j) * C + c]) * double(px[((b * H + r) * W + s) * C + c]);
          }
        }
      pdw[cuv] = T(acc);
    }
    if (pdb)
      for (int64_t c = 0; c < C; ++c) {
        double acc = 0.0;
        for (int64_t e = 0; e < B * H * W; ++e) acc += double(pg[e * C + c]);
        pdb[c] = T(acc);
      }
  });
  return g;
}

}  // namespace relpos::k::cpu
