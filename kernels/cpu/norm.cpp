// kernels/cpu/norm.cpp — LayerNorm and RMSNorm over the last dim, forward and backward.
//   layer_norm: y = (x - mean) * rstd * w + b,   rstd = 1 / sqrt(var + eps) (biased var)
//   rms_norm:   y = x * rstd * w,                rstd = 1 / sqrt(mean(x^2) + eps)
// Backward (per row, xhat = normalised x, g = gy * w):
//   layer_norm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   rms_norm:   dx = rstd * (g - xhat * mean(g * xhat))
// dw = sum_rows gy * xhat, db = sum_rows gy — per-chunk partial sums added in chunk order (no atomics).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/backend.h"

namespace relpos::k::cpu {

namespace {

Shape row_shape(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 1); }

template <typename T>
void norm_forward(bool center, const Tensor& xc, const Tensor& w, const Tensor& b, double eps,
                  NormOut& o) {
  const int64_t D = xc.size(-1), rows = D == 0 ? 0 : xc.numel() / D;
  const T* px = xc.data<T>();
  T* py = o.y.data<T>();
  T* pm = center ? o.mean.data<T>() : nullptr;
  T* pr = o.rstd.data<T>();
  Tensor wc = w.defined() ? w.contiguous() : Tensor();
  Tensor bc = b.defined() ? b.contiguous() : Tensor();
  const T* pw = w.defined() ? wc.data<T>() : nullptr;
  const T* pb = b.defined() ? bc.data<T>() : nullptr;
#pragma omp parallel for schedule(static) if (rows * D >= 16384)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = px + r * D;
    double mean = 0.0, var = 0.0;
    if (center) {
#pragma omp simd reduction(+ : mean)
      for (int64_t i = 0; i < D; ++i) mean += double(xr[i]);
      mean /= double(D);
    }
#pragma omp simd reduction(+ : var)
    for (int64_t i = 0; i < D; ++i) var += (double(xr[i]) - mean) * (double(xr[i]) - mean);
    var /= double(D);
    const double rstd = 1.0 / std::sqrt(var + eps);
    if (pm) pm[r] = T(mean);
    pr[r] = T(rstd);
    T* yr = py + r * D;
#pragma omp simd
    for (int64_t i = 0; i < D; ++i) yr[i] = T((double(xr[i]) - mean) * rstd);
    if (pw)
#pragma omp simd
      for (int64_t i = 0; i < D; ++i) yr[i] *= pw[i];
    if (pb)
#pragma omp simd
      for (int64_t i = 0; i < D; ++i) yr[i] += pb[i];
  }
}

// Rows are taken in fixed chunks of kRowChunk: each chunk's dx rows and its partial column
// sums for dw / db (row-major, vectorised) are one task, and the partials are added in chunk
// order afterwards, so the result is the same for any thread count.
constexpr int64_t kRowChunk = 64;

template <typename T>
NormGrads norm_backward(bool center, const Tensor& gy_in, const Tensor& x_in, const Tensor& mean_in,
                        const Tensor& rstd_in, const Tensor& w_in, bool has_bias) {
  Tensor gy = gy_in.contiguous(), x = x_in.contiguous(), rstd = rstd_in.contiguous();
  Tensor mean = center ? mean_in.contiguous() : Tensor();
  Tensor w = w_in.defined() ? w_in.contiguous() : Tensor();
  const int64_t D = x.size(-1), rows = D == 0 ? 0 : x.numel() / D;
  NormGrads g;
  g.dx = Tensor::empty(x.shape(), x.dtype());
  const T* pg = gy.data<T>();
  const T* px = x.data<T>();
  const T* pr = rstd.data<T>();
  const T* pm = center ? mean.data<T>() : nullptr;
  const T* pw = w.defined() ? w.data<T>() : nullptr;
  T* pdx = g.dx.data<T>();
  const int64_t chunks = (rows + kRowChunk - 1) / kRowChunk;
  const bool want_w = w.defined();
  std::vector<double> part_w(want_w ? size_t(chunks * D) : 0, 0.0), part_b(has_bias ? size_t(chunks * D) : 0, 0.0);
#pragma omp parallel if (rows * D >= 16384)
  {
    std::vector<double> gw(static_cast<size_t>(D)), xh(static_cast<size_t>(D));  // one row: g = gy * w, xhat
#pragma omp for schedule(static)
    for (int64_t ch = 0; ch < chunks; ++ch) {
      double* dwp = want_w ? part_w.data() + ch * D : nullptr;
      double* dbp = has_bias ? part_b.data() + ch * D : nullptr;
      for (int64_t r = ch * kRowChunk; r < std::min(rows, (ch + 1) * kRowChunk); ++r) {
        const T* gr = pg + r * D;
        const T* xr = px + r * D;
        const double m = pm ? double(pm[r]) : 0.0, rs = double(pr[r]);
        double sum_g = 0.0, sum_gx = 0.0;
        if (pw) {
#pragma omp simd
          for (int64_t i = 0; i < D; ++i) gw[size_t(i)] = double(gr[i]) * double(pw[i]);
        } else {
#pragma omp simd
          for (int64_t i = 0; i < D; ++i) gw[size_t(i)] = double(gr[i]);
        }
#pragma omp simd reduction(+ : sum_g, sum_gx)
        for (int64_t i = 0; i < D; ++i) {
          const double h = (double(xr[i]) - m) * rs;
          xh[size_t(i)] = h;
          sum_g += gw[size_t(i)];
          sum_gx += gw[size_t(i)] * h;
        }
        const double mg = center ? sum_g / double(D) : 0.0, mgx = sum_gx / double(D);
        T* dr = pdx + r * D;
#pragma omp simd
        for (int64_t i = 0; i < D; ++i) dr[i] = T(rs * (gw[size_t(i)] - mg - xh[size_t(i)] * mgx));
        if (dwp)
#pragma omp simd
          for (int64_t i = 0; i < D; ++i) dwp[i] += double(gr[i]) * xh[size_t(i)];
        if (dbp)
#pragma omp simd
          for (int64_t i = 0; i < D; ++i) dbp[i] += double(gr[i]);
      }
    }
  }
  if (want_w || has_bias) {
    if (want_w) g.dweight = Tensor::empty({D}, x.dtype());
    if (has_bias) g.dbias = Tensor::empty({D}, x.dtype());
    T* pdw = want_w ? g.dweight.data<T>() : nullptr;
    T* pdb = has_bias ? g.dbias.data<T>() : nullptr;
    for (int64_t i = 0; i < D; ++i) {
      double dw = 0.0, db = 0.0;
      for (int64_t ch = 0; ch < chunks; ++ch) {
        if (pdw) dw += part_w[size_t(ch * D + i)];
        if (pdb) db += part_b[size_t(ch * D + i)];
      }
      if (pdw) pdw[i] = T(dw);
      if (pdb) pdb[i] = T(db);
    }
  }
  return g;
}

}  // namespace

NormOut layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  Tensor xc = x.contiguous();
  NormOut o{Tensor::empty(x.shape(), x.dtype()), Tensor::zeros(row_shape(x), x.dtype()),
            Tensor::zeros(row_shape(x), x.dtype())};
  visit_float(x.dtype(), "layer_norm", [&]<typename T>() { norm_forward<T>(true, xc, weight, bias, eps, o); });
  return o;
}

NormOut rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  Tensor xc = x.contiguous();
  NormOut o{Tensor::empty(x.shape(), x.dtype()), Tensor(), Tensor::zeros(row_shape(x), x.dtype())};
  visit_float(x.dtype(), "rms_norm", [&]<typename T>() { norm_forward<T>(false, xc, weight, Tensor(), eps, o); });
  return o;
}

NormGrads layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                              const Tensor& weight, bool has_bias) {
  return visit_float(x.dtype(), "layer_norm_backward", [&]<typename T>() {
    return norm_backward<T>(true, gy, x, mean, rstd, weight, has_bias);
  });
}

NormGrads rms_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& rstd, const Tensor& weight) {
  return visit_float(x.dtype(), "rms_norm_backward", [&]<typename T>() {
    return norm_backward<T>(false, gy, x, Tensor(), rstd, weight, false);
  });
}

}  // namespace relpos::k::cpu
