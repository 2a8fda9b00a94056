// kernels/cuda/norm.cu — LayerNorm (center = true) and RMSNorm (center = false) over the
// last dim, forward and backward, with the formulas and float64 accumulation of
// kernels/cpu/norm.cpp:
//   forward  (one block per row): mean, var (biased), rstd = 1/sqrt(var + eps),
//            y = T((x - mean) * rstd) [* w] [+ b]
//   backward (one block per row): g = gy * w, xh = (x - mean) * rstd,
//            dx = rstd * (g - mean(g) [layer norm only] - xh * mean(g * xh))
//   dw, db   (one thread per column, rows in order, no atomics): dw = sum gy * xh, db = sum gy
#include <cmath>

#include "kernels/cuda/common.cuh"

namespace relpos::k::cuda::dev {

namespace {

template <typename T>
__global__ void norm_forward_kernel(bool center, const T* x, const T* w, const T* b, T* y, T* mean_out, T* rstd_out,
                                    int64_t rows, int64_t D, double eps) {
  __shared__ double sh[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * D;
    double mean = 0.0;
    if (center) {
      double s = 0.0;
      for (int64_t i = threadIdx.x; i < D; i += blockDim.x) s += double(xr[i]);
      mean = block_reduce(s, SumOp{}, sh) / double(D);
    }
    double v = 0.0;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) v += (double(xr[i]) - mean) * (double(xr[i]) - mean);
    const double var = block_reduce(v, SumOp{}, sh) / double(D);
    const double rstd = 1.0 / sqrt(var + eps);
    if (threadIdx.x == 0) {
      if (mean_out) mean_out[r] = T(mean);
      rstd_out[r] = T(rstd);
    }
    T* yr = y + r * D;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      T val = T((double(xr[i]) - mean) * rstd);
      if (w) val *= w[i];
      if (b) val += b[i];
      yr[i] = val;
    }
  }
}

template <typename T>
__global__ void norm_backward_dx_kernel(bool center, const T* gy, const T* x, const T* mean, const T* rstd, const T* w,
                                        T* dx, int64_t rows, int64_t D) {
  __shared__ double sh[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* gr = gy + r * D;
    const T* xr = x + r * D;
    const double m = center ? double(mean[r]) : 0.0, rs = double(rstd[r]);
    double sg = 0.0, sgx = 0.0;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      const double gi = double(gr[i]) * (w ? double(w[i]) : 1.0);
      const double xh = (double(xr[i]) - m) * rs;
      sg += gi;
      sgx += gi * xh;
    }
    sg = block_reduce(sg, SumOp{}, sh);
    sgx = block_reduce(sgx, SumOp{}, sh);
    const double mg = center ? sg / double(D) : 0.0, mgx = sgx / double(D);
    T* dr = dx + r * D;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      const double gi = double(gr[i]) * (w ? double(w[i]) : 1.0);
      const double xh = (double(xr[i]) - m) * rs;
      dr[i] = T(rs * (gi - mg - xh * mgx));
    }
  }
}

// Pass 1: thread (column i, chunk ch) sums rows ch * kNormRowChunk .. in order, the CPU's
// partial: += g * ((x - mean) * rstd) and += g, in float64.
template <typename T>
__global__ void norm_params_partial_kernel(bool center, const T* gy, const T* x, const T* mean, const T* rstd,
                                           double* part_w, double* part_b, int64_t rows, int64_t D, int64_t chunks) {
  for (int64_t ch = blockIdx.y; ch < chunks; ch += gridDim.y) {
    const int64_t r1 = ch * kNormRowChunk + kNormRowChunk < rows ? ch * kNormRowChunk + kNormRowChunk : rows;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < D; i += int64_t(gridDim.x) * blockDim.x) {
      double sw = 0.0, sb = 0.0;
      for (int64_t r = ch * kNormRowChunk; r < r1; ++r) {
        const double g = double(gy[r * D + i]);
        const double xh = (double(x[r * D + i]) - (center ? double(mean[r]) : 0.0)) * double(rstd[r]);
        sw += g * xh;
        sb += g;
      }
      if (part_w) part_w[ch * D + i] = sw;
      if (part_b) part_b[ch * D + i] = sb;
    }
  }
}

// Pass 2: one thread per column adds the chunks in order.
template <typename T>
__global__ void norm_params_finish_kernel(const double* part_w, const double* part_b, T* dw, T* db, int64_t D,
                                          int64_t chunks) {
  RELPOS_GRID_STRIDE(i, D) {
    double sw = 0.0, sb = 0.0;
    for (int64_t ch = 0; ch < chunks; ++ch) {
      if (part_w) sw += part_w[ch * D + i];
      if (part_b) sb += part_b[ch * D + i];
    }
    if (dw) dw[i] = T(sw);
    if (db) db[i] = T(sb);
  }
}

}  // namespace

void norm_forward(DT t, bool center, const void* x, const void* w, const void* b, void* y, void* mean, void* rstd,
                  int64_t rows, int64_t D, double eps) {
  if (rows == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    norm_forward_kernel<T><<<grid_rows(rows), kThreads>>>(center, static_cast<const T*>(x), static_cast<const T*>(w),
                                                          static_cast<const T*>(b), static_cast<T*>(y),
                                                          static_cast<T*>(mean), static_cast<T*>(rstd), rows, D, eps);
  });
  RELPOS_LAUNCH_CHECK(center ? "layer_norm" : "rms_norm");
}

void norm_backward_dx(DT t, bool center, const void* gy, const void* x, const void* mean, const void* rstd,
                      const void* w, void* dx, int64_t rows, int64_t D) {
  if (rows == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    norm_backward_dx_kernel<T><<<grid_rows(rows), kThreads>>>(
        center, static_cast<const T*>(gy), static_cast<const T*>(x), static_cast<const T*>(mean),
        static_cast<const T*>(rstd), static_cast<const T*>(w), static_cast<T*>(dx), rows, D);
  });
  RELPOS_LAUNCH_CHECK(center ? "layer_norm_backward" : "rms_norm_backward");
}

void norm_backward_params(DT t, bool center, const void* gy, const void* x, const void* mean, const void* rstd,
                          void* dw, void* db, int64_t rows, int64_t D, double* part_w, double* part_b) {
  if (D == 0) return;
  const int64_t chunks = norm_chunks(rows);
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    if (chunks > 0) {
      const dim3 grid(grid_for(D), unsigned(std::min<int64_t>(chunks, 65535)));
      norm_params_partial_kernel<T><<<grid, kThreads>>>(center, static_cast<const T*>(gy), static_cast<const T*>(x),
                                                        static_cast<const T*>(mean), static_cast<const T*>(rstd),
                                                        dw ? part_w : nullptr, db ? part_b : nullptr, rows, D, chunks);
      RELPOS_LAUNCH_CHECK(center ? "layer_norm_backward" : "rms_norm_backward");
    }
    norm_params_finish_kernel<T><<<grid_for(D), kThreads>>>(dw ? part_w : nullptr, db ? part_b : nullptr,
                                                            static_cast<T*>(dw), static_cast<T*>(db), D, chunks);
  });
  RELPOS_LAUNCH_CHECK(center ? "layer_norm_backward" : "rms_norm_backward");
}

}  // namespace relpos::k::cuda::dev
