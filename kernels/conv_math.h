// kernels/conv_math.h — the sums of the depthwise 2D convolution (kernels/ops.h), one output
// element each, the one definition that the CPU loops (kernels/cpu/conv.cpp) and the CUDA kernels
// (kernels/cuda/conv.cu) both run. Grids are channels-last [B, H, W, C], weights [C, K, K], zero
// padding p = (K - 1) / 2 (terms outside the grid are left out). Each sum runs in a fixed order
// (u, then v; or b, i, j) in float64 and is rounded to T once by the caller, so both backends give
// the same bits. Plain C++ (no fmt, no Tensor): nvcc compiles it into device code.
#pragma once
#include <cstdint>

#include "core/host_device.h"

namespace relpos::k {

// The grid and kernel sizes of one convolution.
struct ConvDims {
  int64_t B, H, W, C, K;
  RELPOS_HOST_DEVICE int64_t pad() const { return (K - 1) / 2; }
  RELPOS_HOST_DEVICE int64_t at(int64_t b, int64_t i, int64_t j, int64_t c) const { return ((b * H + i) * W + j) * C + c; }
};

// acc0 + sum_{u, v} w[c, u, v] * src[b, i + s u - s p, j + s v - s p, c], with s = +1 (forward:
// src = x, acc0 = bias[c]) or s = -1 (input gradient, the gather form: src = gy, acc0 = 0).
template <typename T>
RELPOS_HOST_DEVICE inline double dwconv_gather(double acc0, const T* w, const T* src, const ConvDims& d, int64_t b,
                                               int64_t i, int64_t j, int64_t c, int64_t s) {
  const int64_t p = d.pad();
  double acc = acc0;
  for (int64_t u = 0; u < d.K; ++u) {
    const int64_t r = i + s * (u - p);
    if (r < 0 || r >= d.H) continue;
    for (int64_t v = 0; v < d.K; ++v) {
      const int64_t q = j + s * (v - p);
      if (q < 0 || q >= d.W) continue;
      acc += double(w[(c * d.K + u) * d.K + v]) * double(src[d.at(b, r, q, c)]);
    }
  }
  return acc;
}

// dw[c, u, v] = sum_{b, i, j} gy[b, i, j, c] x[b, i + u - p, j + v - p, c].
template <typename T>
RELPOS_HOST_DEVICE inline double dwconv_weight_grad(const T* gy, const T* x, const ConvDims& d, int64_t c, int64_t u,
                                                    int64_t v) {
  const int64_t p = d.pad();
  double acc = 0.0;
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t i = 0; i < d.H; ++i) {
      const int64_t r = i + u - p;
      if (r < 0 || r >= d.H) continue;
      for (int64_t j = 0; j < d.W; ++j) {
        const int64_t q = j + v - p;
        if (q < 0 || q >= d.W) continue;
        acc += double(gy[d.at(b, i, j, c)]) * double(x[d.at(b, r, q, c)]);
      }
    }
  return acc;
}

// dbias[c] = sum over the B * H * W positions of gy[., c].
template <typename T>
RELPOS_HOST_DEVICE inline double dwconv_bias_grad(const T* gy, const ConvDims& d, int64_t c) {
  double acc = 0.0;
  for (int64_t e = 0; e < d.B * d.H * d.W; ++e) acc += double(gy[e * d.C + c]);
  return acc;
}

}  // namespace relpos::k
