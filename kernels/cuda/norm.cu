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

template <typename T>
__global__ void norm_backward_params_kernel(bool center, const T* gy, const T* x, const T* mean, const T* rstd, T* dw,
                                            T* db, int64_t rows, int64_t D) {
  RELPOS_GRID_STRIDE(i, D) {
    double sw = 0.0, sb = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      const double gv = double(gy[r * D + i]);
      sw += gv * (double(x[r * D + i]) - (center ? double(mean[r]) : 0.0)) * double(rstd[r]);
      sb += gv;
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
                          void* dw, void* db, int64_t rows, int64_t D) {
  if (D == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    norm_backward_params_kernel<T><<<grid_for(D), kThreads>>>(
        center, static_cast<const T*>(gy), static_cast<const T*>(x), static_cast<const T*>(mean),
        static_cast<const T*>(rstd), static_cast<T*>(dw), static_cast<T*>(db), rows, D);
  });
  RELPOS_LAUNCH_CHECK(center ? "layer_norm_backward" : "rms_norm_backward");
}

}  // namespace relpos::k::cuda::dev
