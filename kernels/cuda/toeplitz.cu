// kernels/cuda/toeplitz.cu — distance-only biases in Toeplitz form (kernels/cpu/toeplitz.cpp):
//   forward:  out[b, h, i, j] = s[b, h, i, j] + t[h, j - i + Lq - 1]
//   backward: dt[h, d] = sum_b sum_{j - i + Lq - 1 = d} ds[b, h, i, j]
// The backward gives each (h, d) one thread that walks its diagonal in the CPU's order
// (b, then i) with a float64 accumulator: deterministic and bit-identical to the CPU.
#include "kernels/cuda/common.cuh"

namespace relpos::k::cuda::dev {

namespace {

template <typename T>
__global__ void toeplitz_add_kernel(T* out, const T* s, const T* t, int64_t B, int64_t H, int64_t Lq, int64_t Lk) {
  RELPOS_GRID_STRIDE(e, B * H * Lq * Lk) {
    const int64_t j = e % Lk, i = (e / Lk) % Lq, h = (e / (Lk * Lq)) % H;
    out[e] = s[e] + t[h * (Lq + Lk - 1) + (j - i + Lq - 1)];
  }
}

template <typename T>
__global__ void toeplitz_diag_sum_kernel(T* out, const T* ds, int64_t B, int64_t H, int64_t Lq, int64_t Lk) {
  const int64_t nd = Lq + Lk - 1;
  RELPOS_GRID_STRIDE(e, H * nd) {
    const int64_t h = e / nd, d = e % nd;
    // cells of diagonal d: j = d + i - (Lq - 1), 0 <= j < Lk
    const int64_t i_lo = (Lq - 1 - d) > 0 ? (Lq - 1 - d) : 0;
    const int64_t i_hi = (Lq - 1 - d + Lk) < Lq ? (Lq - 1 - d + Lk) : Lq;  // exclusive
    double acc = 0.0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = i_lo; i < i_hi; ++i) acc += double(ds[((b * H + h) * Lq + i) * Lk + (d + i - (Lq - 1))]);
    out[e] = T(acc);
  }
}

}  // namespace

void toeplitz_add(DT t, void* out, const void* s, const void* bias, int64_t B, int64_t H, int64_t Lq, int64_t Lk) {
  const int64_t n = B * H * Lq * Lk;
  if (n == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    toeplitz_add_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(out), static_cast<const T*>(s),
                                                      static_cast<const T*>(bias), B, H, Lq, Lk);
  });
  RELPOS_LAUNCH_CHECK("toeplitz_add");
}

void toeplitz_diag_sum(DT t, void* out, const void* ds, int64_t B, int64_t H, int64_t Lq, int64_t Lk) {
  const int64_t n = H * (Lq + Lk - 1);
  if (n <= 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    toeplitz_diag_sum_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(out), static_cast<const T*>(ds), B, H, Lq,
                                                           Lk);
  });
  RELPOS_LAUNCH_CHECK("toeplitz_diag_sum");
}

}  // namespace relpos::k::cuda::dev
