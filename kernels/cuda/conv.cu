// kernels/cuda/conv.cu — depthwise 2D convolution on a channels-last grid (kernels/cpu/conv.cpp
// has the formulas). One thread per output element (forward, dx: the gather form, no atomics),
// per weight entry (dw) and per channel (dbias), each running the sum of kernels/conv_math.h
// that the CPU runs, with its float64 accumulator: deterministic and bit-identical to the CPU
// (built with --fmad=false; the CPU file with -ffp-contract=off).
#include "kernels/conv_math.h"
#include "kernels/cuda/common.cuh"

namespace relpos::k::cuda::dev {

namespace {

// out[e] = T(dwconv_gather(...)) for every grid element e; s = +1 forward (src x, plus bias),
// s = -1 the input gradient (src gy).
template <typename T>
__global__ void dwconv_gather_kernel(T* out, const T* w, const T* src, const T* bias, ConvDims d, int64_t s) {
  RELPOS_GRID_STRIDE(e, d.B * d.H * d.W * d.C) {
    const int64_t c = e % d.C, j = (e / d.C) % d.W, i = (e / (d.C * d.W)) % d.H, b = e / (d.C * d.W * d.H);
    out[e] = T(dwconv_gather(bias ? double(bias[c]) : 0.0, w, src, d, b, i, j, c, s));
  }
}

template <typename T>
__global__ void dwconv_dw_kernel(T* dw, const T* gy, const T* x, ConvDims d) {
  RELPOS_GRID_STRIDE(e, d.C * d.K * d.K) {
    dw[e] = T(dwconv_weight_grad(gy, x, d, e / (d.K * d.K), (e / d.K) % d.K, e % d.K));
  }
}

template <typename T>
__global__ void dwconv_dbias_kernel(T* db, const T* gy, ConvDims d) {
  RELPOS_GRID_STRIDE(c, d.C) { db[c] = T(dwconv_bias_grad(gy, d, c)); }
}

}  // namespace

void depthwise_conv2d(DT t, void* out, const void* x, const void* w, const void* bias, int64_t B, int64_t H,
                      int64_t W, int64_t C, int64_t K) {
  const ConvDims d{B, H, W, C, K};
  const int64_t n = B * H * W * C;
  if (n == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    dwconv_gather_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(out), static_cast<const T*>(w),
                                                       static_cast<const T*>(x), static_cast<const T*>(bias), d, 1);
  });
  RELPOS_LAUNCH_CHECK("depthwise_conv2d");
}

void depthwise_conv2d_backward(DT t, void* dx, void* dw, void* dbias, const void* gy, const void* x, const void* w,
                               int64_t B, int64_t H, int64_t W, int64_t C, int64_t K) {
  const ConvDims d{B, H, W, C, K};
  const int64_t n = B * H * W * C;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    if (n > 0)
      dwconv_gather_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(dx), static_cast<const T*>(w),
                                                         static_cast<const T*>(gy), nullptr, d, -1);
    if (C * K * K > 0)
      dwconv_dw_kernel<T><<<grid_for(C * K * K), kThreads>>>(static_cast<T*>(dw), static_cast<const T*>(gy),
                                                             static_cast<const T*>(x), d);
    if (dbias && C > 0)
      dwconv_dbias_kernel<T><<<grid_for(C), kThreads>>>(static_cast<T*>(dbias), static_cast<const T*>(gy), d);
  });
  RELPOS_LAUNCH_CHECK("depthwise_conv2d_backward");
}

}  // namespace relpos::k::cuda::dev
