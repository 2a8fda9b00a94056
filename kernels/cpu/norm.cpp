// kernels/cpu/norm.cpp — LayerNorm and RMSNorm over the last dim, forward and backward.
//   layer_norm: y = (x - mean) * rstd * w + b,   rstd = 1 / sqrt(var + eps) (biased var)
//   rms_norm:   y = x * rstd * w,                rstd = 1 / sqrt(mean(x^2) + eps)
// Backward (per row, xhat = normalised x, g = gy * w):
//   layer_norm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   rms_norm:   dx = rstd * (g - xhat * mean(g * xhat))
// dw = sum_rows gy * xhat, db = sum_rows gy — reduced per column (no atomics).
#include <cmath>

#include "relpos/kernels/backend.h"

namespace relpos::k::cpu {

namespace {

void check_norm_args(const char* op, const Tensor& x, const Tensor& w, const Tensor& b) {
  check_defined(x, op, "input");
  RELPOS_CHECK(x.dim() >= 1, "{}: input must have at least 1 dim", op);
  const int64_t D = x.size(-1);
  for (const Tensor* t : {&w, &b}) {
    if (!t->defined()) continue;
    check_same_dtype_device(x, *t, op);
    RELPOS_CHECK(t->dim() == 1 && t->size(0) == D, "{}: weight/bias shape {} does not match last dim {} of input {}",
                 op, shape_str(t->shape()), D, shape_str(x.shape()));
  }
}

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
      for (int64_t i = 0; i < D; ++i) mean += double(xr[i]);
      mean /= double(D);
    }
    for (int64_t i = 0; i < D; ++i) var += (double(xr[i]) - mean) * (double(xr[i]) - mean);
    var /= double(D);
    const double rstd = 1.0 / std::sqrt(var + eps);
    if (pm) pm[r] = T(mean);
    pr[r] = T(rstd);
    T* yr = py + r * D;
    for (int64_t i = 0; i < D; ++i) {
      T v = T((double(xr[i]) - mean) * rstd);
      if (pw) v *= pw[i];
      if (pb) v += pb[i];
      yr[i] = v;
    }
  }
}

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
#pragma omp parallel for schedule(static) if (rows * D >= 16384)
  for (int64_t r = 0; r < rows; ++r) {
    const T* gr = pg + r * D;
    const T* xr = px + r * D;
    const double m = pm ? double(pm[r]) : 0.0, rs = double(pr[r]);
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t i = 0; i < D; ++i) {
      double gi = double(gr[i]) * (pw ? double(pw[i]) : 1.0);
      double xh = (double(xr[i]) - m) * rs;
      sum_g += gi;
      sum_gx += gi * xh;
    }
    const double mg = center ? sum_g / double(D) : 0.0, mgx = sum_gx / double(D);
    T* dr = pdx + r * D;
    for (int64_t i = 0; i < D; ++i) {
      double gi = double(gr[i]) * (pw ? double(pw[i]) : 1.0);
      double xh = (double(xr[i]) - m) * rs;
      dr[i] = T(rs * (gi - mg - xh * mgx));
    }
  }
  if (w.defined() || has_bias) {
    if (w.defined()) g.dweight = Tensor::empty({D}, x.dtype());
    if (has_bias) g.dbias = Tensor::empty({D}, x.dtype());
    T* pdw = w.defined() ? g.dweight.data<T>() : nullptr;
    T* pdb = has_bias ? g.dbias.data<T>() : nullptr;
#pragma omp parallel for schedule(static) if (rows * D >= 16384)
    for (int64_t i = 0; i < D; ++i) {
      double dw = 0.0, db = 0.0;
      for (int64_t r = 0; r < rows; ++r) {
        double gv = double(pg[r * D + i]);
        dw += gv * (double(px[r * D + i]) - (pm ? double(pm[r]) : 0.0)) * double(pr[r]);
        db += gv;
      }
      if (pdw) pdw[i] = T(dw);
      if (pdb) pdb[i] = T(db);
    }
  }
  return g;
}

}  // namespace

NormOut layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_norm_args("layer_norm", x, weight, bias);
  Tensor xc = x.contiguous();
  NormOut o{Tensor::empty(x.shape(), x.dtype()), Tensor::zeros(row_shape(x), x.dtype()),
            Tensor::zeros(row_shape(x), x.dtype())};
  visit_float(x.dtype(), "layer_norm", [&]<typename T>() { norm_forward<T>(true, xc, weight, bias, eps, o); });
  return o;
}

NormOut rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  check_norm_args("rms_norm", x, weight, Tensor());
  Tensor xc = x.contiguous();
  NormOut o{Tensor::empty(x.shape(), x.dtype()), Tensor(), Tensor::zeros(row_shape(x), x.dtype())};
  visit_float(x.dtype(), "rms_norm", [&]<typename T>() { norm_forward<T>(false, xc, weight, Tensor(), eps, o); });
  return o;
}

NormGrads layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean,
                              const Tensor& rstd, const Tensor& weight, bool has_bias) {
  check_same_dtype_device(gy, x, "layer_norm_backward");
  return visit_float(x.dtype(), "layer_norm_backward", [&]<typename T>() {
    return norm_backward<T>(true, gy, x, mean, rstd, weight, has_bias);
  });
}

NormGrads rms_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& rstd,
                            const Tensor& weight) {
  check_same_dtype_device(gy, x, "rms_norm_backward");
  return visit_float(x.dtype(), "rms_norm_backward", [&]<typename T>() {
    return norm_backward<T>(false, gy, x, Tensor(), rstd, weight, false);
  });
}

}  // namespace relpos::k::cpu
