// kernels/cuda/masking.cu — the causal mask as a predicate (kernels/cpu/masking.cpp):
// key k_offset + j is hidden from query q_offset + i when k_offset + j > q_offset + i.
#include "kernels/cuda/common.cuh"

namespace relpos::k::cuda::dev {

namespace {

// x, out: [rows, Lk] contiguous; row r is query i = r % Lq.
template <typename T>
__global__ void causal_fill_kernel(T* out, const T* x, int64_t n, int64_t Lq, int64_t Lk, int64_t q_offset,
                                   int64_t k_offset, T value) {
  RELPOS_GRID_STRIDE(e, n) {
    const int64_t r = e / Lk, j = e % Lk, i = r % Lq;
    // visible keys: j <= q_offset + i - k_offset  (the CPU clamps to [0, Lk]: same predicate)
    out[e] = j < q_offset + i - k_offset + 1 ? x[e] : value;
  }
}

}  // namespace

void causal_fill(DT t, void* out, const void* x, int64_t rows, int64_t Lq, int64_t Lk, int64_t q_offset,
                 int64_t k_offset, double value) {
  const int64_t n = rows * Lk;
  if (n == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    causal_fill_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(out), static_cast<const T*>(x), n, Lq, Lk,
                                                     q_offset, k_offset, T(value));
  });
  RELPOS_LAUNCH_CHECK("causal_fill");
}

}  // namespace relpos::k::cuda::dev
