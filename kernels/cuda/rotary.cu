// kernels/cuda/rotary.cu — rotary position encoding (kernels/cpu/rotary.cpp): one thread per
// (row, channel); a channel below 2 half computes its pair's member, the rest copy.
#include "kernels/cuda/common.cuh"

namespace relpos::k::cuda::dev {

namespace {

template <typename T>
__global__ void rotary_kernel(T* out, const T* x, const T* cs, int64_t N, int64_t L, int64_t dh, int64_t half,
                              bool interleaved, T sign) {
  RELPOS_GRID_STRIDE(e, N * L * dh) {
    const int64_t ch = e % dh, row = e / dh, m = row % L;
    const T* xr = x + row * dh;
    if (ch >= 2 * half) {
      out[e] = xr[ch];
      continue;
    }
    const int64_t p = interleaved ? ch / 2 : (ch < half ? ch : ch - half);
    const bool first = interleaved ? (ch % 2 == 0) : (ch < half);
    const int64_t ia = interleaved ? 2 * p : p, ib = interleaved ? 2 * p + 1 : p + half;
    const T c = cs[m * half + p], s = sign * cs[(L + m) * half + p];
    const T a = xr[ia], b = xr[ib];
    out[e] = first ? a * c - b * s : a * s + b * c;
  }
}

}  // namespace

void rotary(DT t, void* out, const void* x, const void* cs, int64_t N, int64_t L, int64_t dh, int64_t half,
            bool interleaved, bool inverse) {
  const int64_t n = N * L * dh;
  if (n == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    rotary_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(out), static_cast<const T*>(x),
                                                static_cast<const T*>(cs), N, L, dh, half, interleaved,
                                                inverse ? T(-1) : T(1));
  });
  RELPOS_LAUNCH_CHECK("rotary");
}

}  // namespace relpos::k::cuda::dev
