// kernels/cuda/conv.cu — depthwise 2D convolution on a channels-last grid (kernels/cpu/conv.cpp
// has the formulas). One thread per output element (forward, dx: the gather form, no atomics),
// per weight entry (dw) and per channel (dbias), each walking its sum in the CPU's order with a
// float64 accumulator: deterministic and bit-identical to the CPU (built with --fmad=false;
// the CPU file with -ffp-contract=off).
#include "kernels/cuda/common.cuh"

namespace relpos::k::cuda::dev {

namespace {

template <typename T>
__global__ void dwconv_forward_kernel(T* out, const T* x, const T* w, const T* bias, int64_t B, int64_t H, int64_t W,
                                      int64_t C, int64_t K) {
  const int64_t p = (K - 1) / 2;
  RELPOS_GRID_STRIDE(e, B * H * W * C) {
    const int64_t c = e % C, j = (e / C) % W, i = (e / (C * W)) % H, b = e / (C * W * H);
    double acc = bias ? double(bias[c]) : 0.0;
    for (int64_t u = 0; u < K; ++u) {
      const int64_t r = i + u - p;
      if (r < 0 || r >= H) continue;
      for (int64_t v = 0; v < K; ++v) {
        const int64_t s = j + v - p;
        if (s < 0 || s >= W) continue;
        acc += double(w[(c * K + u) * K + v]) * double(x[((b * H + r) * W + s) * C + c]);
      }
    }
    out[e] = T(acc);
  }
}

template <typename T>
__global__ void dwconv_dx_kernel(T* dx, const T* gy, const T* w, int64_t B, int64_t H, int64_t W, int64_t C,
                                 int64_t K) {
  const int64_t p = (K - 1) / 2;
  RELPOS_GRID_STRIDE(e, B * H * W * C) {
    const int64_t c = e % C, j = (e / C) % W, i = (e / (C * W)) % H, b = e / (C * W * H);
    double acc = 0.0;
    for (int64_t u = 0; u < K; ++u) {
      const int64_t r = i - u + p;
      if (r < 0 || r >= H) continue;
      for (int64_t v = 0; v < K; ++v) {
        const int64_t s = j - v + p;
        if (s < 0 || s >= W) continue;
        acc += double(w[(c * K + u) * K + v]) * double(gy[((b * H + r) * W + s) * C + c]);
      }
    }
    dx[e] = T(acc);
  }
}

template <typename T>
__global__ void dwconv_dw_kernel(T* dw, const T* gy, const T* x, int64_t B, int64_t H, int64_t W, int64_t C,
                                 int64_t K) {
  const int64_t p = (K - 1) / 2;
  RELPOS_GRID_STRIDE(e, C * K * K) {
    const int64_t c = e / (K * K), u = (e / K) % K, v = e % K;
    double acc = 0.0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < H; ++i) {
        const int64_t r = i + u - p;
        if (r < 0 || r >= H) continue;
        for (int64_t j = 0; j < W; ++j) {
          const int64_t s = j + v - p;
          if (s < 0 || s >= W) continue;
          acc += double(gy[((b * H + i) * W + j) * C + c]) * double(x[((b * H + r) * W + s) * C + c]);
        }
      }
    dw[e] = T(acc);
  }
}

template <typename T>
__global__ void dwconv_dbias_kernel(T* db, const T* gy, int64_t N, int64_t C) {
  RELPOS_GRID_STRIDE(c, C) {
    double acc = 0.0;
    for (int64_t e = 0; e < N; ++e) acc += double(gy[e * C + c]);
    db[c] = T(acc);
  }
}

}  // namespace

void depthwise_conv2d(DT t, void* out, const void* x, const void* w, const void* bias, int64_t B, int64_t H,
                      int64_t W, int64_t C, int64_t K) {
  const int64_t n = B * H * W * C;
  if (n == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    dwconv_forward_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(out), static_cast<const T*>(x),
                                                        static_cast<const T*>(w), static_cast<const T*>(bias), B, H,
                                                        W, C, K);
  });
  RELPOS_LAUNCH_CHECK("depthwise_conv2d");
}

void depthwise_conv2d_backward(DT t, void* dx, void* dw, void* dbias, const void* gy, const void* x, const void* w,
                               int64_t B, int64_t H, int64_t W, int64_t C, int64_t K) {
  const int64_t n = B * H * W * C;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    if (n > 0)
      dwconv_dx_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(dx), static_cast<const T*>(gy),
                                                     static_cast<const T*>(w), B, H, W, C, K);
    if (C * K * K > 0)
      dwconv_dw_kernel<T><<<grid_for(C * K * K), kThreads>>>(static_cast<T*>(dw), static_cast<const T*>(gy),
                                                             static_cast<const T*>(x), B, H, W, C, K);
    if (dbias && C > 0)
      dwconv_dbias_kernel<T><<<grid_for(C), kThreads>>>(static_cast<T*>(dbias), static_cast<const T*>(gy), B * H * W,
                                                        C);
  });
  RELPOS_LAUNCH_CHECK("depthwise_conv2d_backward");
}

}  // namespace relpos::k::cuda::dev
