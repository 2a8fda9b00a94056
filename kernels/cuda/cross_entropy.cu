// kernels/cuda/cross_entropy.cu — fused log-softmax + NLL (kernels/cpu/cross_entropy.cpp):
//   lse_n = m + log(sum exp(x - m)) (float64), loss_n = lse_n - x[target_n] (0 when ignored)
//   reduce: one block sums loss_n with a fixed tree (deterministic), / count (mean)
// Targets are checked here (launch.h: Check), never copied to the host; the count of rows
// not ignored is computed on the device (ce_count) for the mean.
//   backward: dx[n, c] = T(scale_n * exp(x - lse_n)), then dx[n, target] -= T(scale_n)
#include <cmath>

#include "kernels/cuda/common.cuh"

namespace relpos::k::cuda::dev {

namespace {

template <typename T>
__global__ void ce_forward_kernel(const T* logits, const int64_t* target, int64_t N, int64_t C, int64_t ignore_index,
                                  T* lse_out, T* per_row, Check chk) {
  __shared__ double sh[kThreads];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* row = logits + n * C;
    double m = -INFINITY;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) m = MaxOp{}(m, double(row[c]));
    m = block_reduce(m, MaxOp{}, sh);
    double s = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += exp(double(row[c]) - m);
    s = block_reduce(s, SumOp{}, sh);
    if (threadIdx.x == 0) {
      const double lse = m + log(s);
      lse_out[n] = T(lse);
      const int64_t tn = target[n];
      const bool bad = tn != ignore_index && (tn < 0 || tn >= C);
      if (bad) record_failure(chk, n);
      per_row[n] = tn == ignore_index || bad ? T(0) : T(lse - double(row[tn]));
    }
  }
}

__global__ void ce_count_kernel(const int64_t* target, int64_t N, int64_t ignore_index, int64_t* count) {
  __shared__ long long sh[kThreads];
  long long c = 0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) c += target[i] != ignore_index ? 1 : 0;
  c = block_reduce(c, SumOp{}, sh);
  if (threadIdx.x == 0) *count = int64_t(c);
}

template <typename T>
__global__ void ce_reduce_kernel(T* loss, const T* per_row, int64_t N, const int64_t* count) {
  __shared__ double sh[kThreads];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) s += double(per_row[i]);
  s = block_reduce(s, SumOp{}, sh);
  const double divisor = count ? double(*count) : 1.0;
  if (threadIdx.x == 0) *loss = T(divisor == 0.0 ? 0.0 : s / divisor);
}

template <typename T>
__global__ void ce_backward_kernel(T* dx, const T* g, bool per_row_g, bool mean, const int64_t* count_dev,
                                   int64_t count_host, const T* logits, const T* lse, const int64_t* target, int64_t N,
                                   int64_t C, int64_t ignore_index, Check chk) {
  const double g_div = !mean ? 1.0 : count_dev ? double(*count_dev) : double(count_host);
  RELPOS_GRID_STRIDE(e, N * C) {
    const int64_t n = e / C, c = e % C;
    const int64_t tn = target[n];
    if (tn == ignore_index) {
      dx[e] = T(0);
      continue;
    }
    if (tn < 0 || tn >= C) {
      if (c == 0) record_failure(chk, n);
      dx[e] = T(0);
      continue;
    }
    const double scale = per_row_g ? double(g[n]) : double(g[0]) / g_div;
    T v = T(scale * exp(double(logits[e]) - double(lse[n])));
    if (c == tn) v -= T(scale);
    dx[e] = v;
  }
}

}  // namespace

void ce_forward(DT t, const void* logits, const int64_t* target, int64_t N, int64_t C, int64_t ignore_index, void* lse,
                void* per_row, Check chk) {
  if (N == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    ce_forward_kernel<T><<<grid_rows(N), kThreads>>>(static_cast<const T*>(logits), target, N, C, ignore_index,
                                                     static_cast<T*>(lse), static_cast<T*>(per_row), chk);
  });
  RELPOS_LAUNCH_CHECK("cross_entropy");
}

void ce_count(const int64_t* target, int64_t N, int64_t ignore_index, int64_t* count) {
  ce_count_kernel<<<1, kThreads>>>(target, N, ignore_index, count);
  RELPOS_LAUNCH_CHECK("cross_entropy");
}

void ce_reduce(DT t, void* loss, const void* per_row, int64_t N, const int64_t* count) {
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    ce_reduce_kernel<T><<<1, kThreads>>>(static_cast<T*>(loss), static_cast<const T*>(per_row), N, count);
  });
  RELPOS_LAUNCH_CHECK("cross_entropy");
}

void ce_backward(DT t, void* dx, const void* g, int reduction, const int64_t* count_dev, int64_t count_host,
                 const void* logits, const void* lse, const int64_t* target, int64_t N, int64_t C, int64_t ignore_index,
                 Check chk) {
  if (N * C == 0) return;
  // k::Reduction: Mean = 0, Sum = 1, None = 2 (checked in cross_entropy.cpp). For mean the
  // scale is g / count, as the CPU computes it (count == 0 only when every row is ignored).
  const bool per_row_g = reduction == 2;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    ce_backward_kernel<T><<<grid_for(N * C), kThreads>>>(
        static_cast<T*>(dx), static_cast<const T*>(g), per_row_g, reduction == 0, count_dev, count_host,
        static_cast<const T*>(logits), static_cast<const T*>(lse), target, N, C, ignore_index, chk);
  });
  RELPOS_LAUNCH_CHECK("cross_entropy_backward");
}

}  // namespace relpos::k::cuda::dev
