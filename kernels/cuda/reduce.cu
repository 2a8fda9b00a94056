// kernels/cuda/reduce.cu — row reductions (sum, mean, max, min, logsumexp, var) and
// sum_squares. Each row is reduced by one block: thread t takes elements t, t + 256, ... in
// order, then a fixed tree combines the 256 partials — float64 throughout, so a result does
// not change from run to run (it may differ from the CPU's sequential sum in the last bits).
#include <cmath>

#include "kernels/cuda/common.cuh"

namespace relpos::k::cuda::dev {

namespace {

enum R : int { Sum, Mean, Max, Min, LogSumExp, Var };  // k::Reduce order (checked in reduce.cpp)

// x: [rows, n] contiguous -> out [rows]
template <typename T>
__global__ void reduce_rows_kernel(int op, T* out, const T* x, int64_t rows, int64_t n, int64_t correction) {
  __shared__ double sh[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* p = x + r * n;
    double acc = 0.0;
    if (op == Sum || op == Mean) {
      double s = 0.0;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += double(p[i]);
      acc = block_reduce(s, SumOp{}, sh);
      if (op == Mean) acc /= double(n);
    } else if (op == Max || op == Min) {
      double m = op == Max ? -INFINITY : INFINITY;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        m = op == Max ? MaxOp{}(m, double(p[i])) : MinOp{}(m, double(p[i]));
      acc = op == Max ? block_reduce(m, MaxOp{}, sh) : block_reduce(m, MinOp{}, sh);
    } else if (op == LogSumExp) {
      double m = -INFINITY;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = MaxOp{}(m, double(p[i]));
      m = block_reduce(m, MaxOp{}, sh);
      if (isinf(m)) {
        acc = m;
      } else {
        double s = 0.0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += exp(double(p[i]) - m);
        acc = m + log(block_reduce(s, SumOp{}, sh));
      }
    } else {  // Var
      double s = 0.0;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += double(p[i]);
      const double mean = block_reduce(s, SumOp{}, sh) / double(n);
      double d2 = 0.0;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) d2 += (double(p[i]) - mean) * (double(p[i]) - mean);
      const int64_t dof = n - correction > 0 ? n - correction : 0;
      acc = block_reduce(d2, SumOp{}, sh) / double(dof);
    }
    if (threadIdx.x == 0) out[r] = T(acc);
  }
}

constexpr int64_t kChunk = 8192;  // as kernels/cpu/optim.cpp

// One block per chunk of kChunk elements -> partial[c] = the chunk's sum (of squares when
// Square), fixed tree.
template <typename T, bool Square>
__global__ void chunk_partial_kernel(double* partial, const T* x, int64_t n, int64_t chunks) {
  __shared__ double sh[kThreads];
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int64_t begin = c * kChunk, end = begin + kChunk < n ? begin + kChunk : n;
    double s = 0.0;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
      s += Square ? double(x[i]) * double(x[i]) : double(x[i]);
    s = block_reduce(s, SumOp{}, sh);
    if (threadIdx.x == 0) partial[c] = s;
  }
}

// One block: *out = the sum of the partials (fixed tree), / n for a mean.
template <typename T>
__global__ void chunk_finish_kernel(T* out, const double* partial, int64_t n, int64_t chunks, bool mean) {
  __shared__ double sh[kThreads];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < chunks; i += blockDim.x) s += partial[i];
  s = block_reduce(s, SumOp{}, sh);
  if (threadIdx.x == 0) *out = T(mean ? s / double(n) : s);
}

// Column sums, pass 1: thread (column i, chunk ch) adds rows ch * kColChunk .. in order.
template <typename T>
__global__ void col_partial_kernel(double* part, const T* x, int64_t R, int64_t K, int64_t chunks) {
  for (int64_t ch = blockIdx.y; ch < chunks; ch += gridDim.y) {
    const int64_t r1 = ch * kColChunk + kColChunk < R ? ch * kColChunk + kColChunk : R;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < K; i += int64_t(gridDim.x) * blockDim.x) {
      double s = 0.0;
      for (int64_t r = ch * kColChunk; r < r1; ++r) s += double(x[r * K + i]);
      part[ch * K + i] = s;
    }
  }
}

// Column sums, pass 2: one thread per column adds the chunks in order (/ R for the mean).
template <typename T>
__global__ void col_finish_kernel(T* out, const double* part, int64_t R, int64_t K, int64_t chunks, bool mean) {
  RELPOS_GRID_STRIDE(i, K) {
    double s = 0.0;
    for (int64_t ch = 0; ch < chunks; ++ch) s += part[ch * K + i];
    out[i] = T(mean ? s / double(R) : s);
  }
}

}  // namespace

void reduce_cols(int op, DT t, void* out, const void* x, int64_t R, int64_t K, double* part) {
  if (K == 0) return;
  const int64_t chunks = col_chunks(R);
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    if (chunks > 0) {
      const dim3 grid(grid_for(K), unsigned(std::min<int64_t>(chunks, 65535)));
      col_partial_kernel<T><<<grid, kThreads>>>(part, static_cast<const T*>(x), R, K, chunks);
      RELPOS_LAUNCH_CHECK("reduce");
    }
    col_finish_kernel<T><<<grid_for(K), kThreads>>>(static_cast<T*>(out), part, R, K, chunks, op == Mean);
  });
  RELPOS_LAUNCH_CHECK("reduce");
}

int64_t all_chunks(int64_t n) {
  return (n + kChunk - 1) / kChunk;
}

void reduce_all(int op, DT t, void* out, const void* x, int64_t n, double* partial) {
  const int64_t chunks = all_chunks(n);
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    if (chunks > 0) {
      chunk_partial_kernel<T, false><<<grid_rows(chunks), kThreads>>>(partial, static_cast<const T*>(x), n, chunks);
      RELPOS_LAUNCH_CHECK("reduce");
    }
    chunk_finish_kernel<T><<<1, kThreads>>>(static_cast<T*>(out), partial, n, chunks, op == Mean);
  });
  RELPOS_LAUNCH_CHECK("reduce");
}

void reduce_rows(int op, DT t, void* out, const void* x, int64_t rows, int64_t R, int64_t correction) {
  if (rows == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    reduce_rows_kernel<T><<<grid_rows(rows), kThreads>>>(op, static_cast<T*>(out), static_cast<const T*>(x), rows, R,
                                                         correction);
  });
  RELPOS_LAUNCH_CHECK("reduce");
}

int64_t sum_squares_chunks(int64_t n) { return (n + kChunk - 1) / kChunk; }

void sum_squares(DT t, double* out, const void* x, int64_t n, double* partial) {
  const int64_t chunks = sum_squares_chunks(n);
  if (chunks > 0) {
    visit_float(t, [&](auto tag) {
      using T = decltype(tag);
      chunk_partial_kernel<T, true><<<grid_rows(chunks), kThreads>>>(partial, static_cast<const T*>(x), n, chunks);
    });
    RELPOS_LAUNCH_CHECK("sum_squares");
  }
  chunk_finish_kernel<double><<<1, kThreads>>>(out, partial, n, chunks, false);
  RELPOS_LAUNCH_CHECK("sum_squares");
}

}  // namespace relpos::k::cuda::dev
