// kernels/cuda/elementwise.cu — unary, unary_grad, binary (broadcast), where, add_, mul_ on
// strided operands. One thread per output element (grid-stride); every operand is read
// through its own strides over the common shape, so views and broadcasts are never copied.
// The formulas are those of kernels/cpu/elementwise.cpp (device libm: a few ulp apart).
#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/common.cuh"

namespace relpos::k::cuda::dev {

namespace {

// k::Unary, in declaration order (elementwise.cpp static_asserts the values).
enum U : int {
  Neg, Exp, Log, Sqrt, Rsqrt, Abs, Sign, Tanh, Sigmoid, Relu, GeluTanh, GeluErf, Silu, Floor, Ceil,
  ReluGrad, GeluTanhGrad, GeluErfGrad, SiluGrad, TanhGradFromY, SigmoidGradFromY,
  AddScalar, MulScalar, PowScalar, RPowScalar, Clamp, ClampMask, RoundBF16, RoundFP16
};
// k::Binary, in declaration order.
enum B : int { Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge };

template <typename T>
__device__ T unary_value(int op, T x, T p, T q) {
  const T kSqrt2OverPi = T(0.7978845608028654);  // sqrt(2/pi)
  const T kC = T(0.044715);
  const T kInvSqrt2 = T(0.7071067811865476);
  const T kInvSqrt2Pi = T(0.3989422804014327);  // 1/sqrt(2 pi)
  switch (op) {
    case Neg: return -x;
    case Exp: return exp(x);
    case Log: return log(x);
    case Sqrt: return sqrt(x);
    case Rsqrt: return T(1) / sqrt(x);
    case Abs: return fabs(x);
    case Sign: return T((x > 0) - (x < 0));
    case Floor: return floor(x);
    case Ceil: return ceil(x);
    case Tanh: return tanh(x);
    case Sigmoid: return T(1) / (T(1) + exp(-x));
    case Relu: return x > 0 ? x : T(0);
    case GeluTanh: {
      T t = tanh(kSqrt2OverPi * (x + kC * x * x * x));
      return T(0.5) * x * (T(1) + t);
    }
    case GeluErf: return T(0.5) * x * (T(1) + erf(x * kInvSqrt2));
    case Silu: return x / (T(1) + exp(-x));
    case ReluGrad: return x > 0 ? T(1) : T(0);
    case GeluTanhGrad: {
      T t = tanh(kSqrt2OverPi * (x + kC * x * x * x));
      return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * kSqrt2OverPi * (T(1) + T(3) * kC * x * x);
    }
    case GeluErfGrad: return T(0.5) * (T(1) + erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * exp(T(-0.5) * x * x);
    case SiluGrad: {
      T s = T(1) / (T(1) + exp(-x));
      return s * (T(1) + x * (T(1) - s));
    }
    case TanhGradFromY: return T(1) - x * x;
    case SigmoidGradFromY: return x * (T(1) - x);
    case AddScalar: return x + p;
    case MulScalar: return x * p;
    case PowScalar: return pow(x, p);
    case RPowScalar: return pow(p, x);
    case Clamp: return x < p ? p : (x > q ? q : x);
    case ClampMask: return (x >= p && x <= q) ? T(1) : T(0);
    // (from double: rounded to float first, as the CPU does)
    case RoundBF16: return T(__bfloat162float(__float2bfloat16_rn(float(x))));
    case RoundFP16: return T(__half2float(__float2half_rn(float(x))));
  }
  return x;
}

template <typename T> __device__ T pow_value(T a, T b) { return pow(a, b); }
template <> __device__ int64_t pow_value<int64_t>(int64_t a, int64_t b) {  // std::pow(int64, int64) is a double pow
  return int64_t(pow(double(a), double(b)));
}

template <typename T>
__device__ T binary_value(int op, T a, T b, const Check& bad) {
  switch (op) {
    case Add: return a + b;
    case Sub: return a - b;
    case Mul: return a * b;
    case Div:
      if constexpr (std::is_integral_v<T>) {
        if (b == 0 || (b == -1 && a == INT64_MIN)) {  // would trap: record it, the host throws
          record_failure(bad, 0);
          return T(0);
        }
      }
      return a / b;
    case Pow: return pow_value(a, b);
    case Maximum: return a > b ? a : b;
    case Minimum: return a < b ? a : b;
    case Eq: return T(a == b);
    case Ne: return T(a != b);
    case Lt: return T(a < b);
    case Le: return T(a <= b);
    case Gt: return T(a > b);
    case Ge: return T(a >= b);
  }
  return a;
}

template <typename T>
__global__ void unary_kernel(int op, T* out, const T* x, Strides xs, Geom g, int64_t n, T p, T q) {
  RELPOS_GRID_STRIDE(i, n) out[i] = unary_value<T>(op, x[offset_of(i, g, xs)], p, q);
}

template <typename T>
__global__ void unary_grad_kernel(int op, T* out, const T* gr, Strides gs, const T* x, Strides xs, Geom g, int64_t n,
                                  T p, T q) {
  RELPOS_GRID_STRIDE(i, n) out[i] = gr[offset_of(i, g, gs)] * unary_value<T>(op, x[offset_of(i, g, xs)], p, q);
}

template <typename T>
__global__ void binary_kernel(int op, T* out, const T* a, Strides as, const T* b, Strides bs, Geom g, int64_t n,
                              Check bad) {
  RELPOS_GRID_STRIDE(i, n) out[i] = binary_value<T>(op, a[offset_of(i, g, as)], b[offset_of(i, g, bs)], bad);
}

template <typename T, typename C>
__global__ void where_kernel(T* out, const C* c, Strides cs, const T* a, Strides as, const T* b, Strides bs, Geom g,
                             int64_t n) {
  RELPOS_GRID_STRIDE(i, n) {
    out[i] = c[offset_of(i, g, cs)] != C(0) ? a[offset_of(i, g, as)] : b[offset_of(i, g, bs)];
  }
}

template <typename T>
__global__ void add_kernel(T* dst, Strides ds, const T* src, Strides ss, Geom g, int64_t n, T alpha) {
  RELPOS_GRID_STRIDE(i, n) dst[offset_of(i, g, ds)] += alpha * src[offset_of(i, g, ss)];
}

template <typename T>
__global__ void mul_kernel(T* dst, Strides ds, Geom g, int64_t n, T s) {
  RELPOS_GRID_STRIDE(i, n) dst[offset_of(i, g, ds)] *= s;
}

}  // namespace

void unary(int op, DT t, void* out, const void* x, const Strides& xs_in, const Geom& g_in, double p, double q) {
  const int64_t n = numel(g_in);
  if (n == 0) return;
  Geom g = g_in;
  Strides xs = xs_in;
  collapse(g, {&xs});
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    unary_kernel<T><<<grid_for(n), kThreads>>>(op, static_cast<T*>(out), static_cast<const T*>(x), xs, g, n, T(p),
                                               T(q));
  });
  RELPOS_LAUNCH_CHECK("unary op");
}

void unary_grad(int op, DT t, void* out, const void* gr, const Strides& gs_in, const void* x, const Strides& xs_in,
                const Geom& g_in, double p, double q) {
  const int64_t n = numel(g_in);
  if (n == 0) return;
  Geom g = g_in;
  Strides gs = gs_in, xs = xs_in;
  collapse(g, {&gs, &xs});
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    unary_grad_kernel<T><<<grid_for(n), kThreads>>>(op, static_cast<T*>(out), static_cast<const T*>(gr), gs,
                                                    static_cast<const T*>(x), xs, g, n, T(p), T(q));
  });
  RELPOS_LAUNCH_CHECK("unary_grad");
}

void binary(int op, DT t, void* out, const void* a, const Strides& as_in, const void* b, const Strides& bs_in,
            const Geom& g_in, Check bad) {
  const int64_t n = numel(g_in);
  if (n == 0) return;
  Geom g = g_in;
  Strides as = as_in, bs = bs_in;
  collapse(g, {&as, &bs});
  visit_all(t, [&](auto tag) {
    using T = decltype(tag);
    binary_kernel<T><<<grid_for(n), kThreads>>>(op, static_cast<T*>(out), static_cast<const T*>(a), as,
                                                static_cast<const T*>(b), bs, g, n, bad);
  });
  RELPOS_LAUNCH_CHECK("binary op");
}

void where(DT ct, DT t, void* out, const void* c, const Strides& cs_in, const void* a, const Strides& as_in,
           const void* b, const Strides& bs_in, const Geom& g_in) {
  const int64_t n = numel(g_in);
  if (n == 0) return;
  Geom g = g_in;
  Strides cs = cs_in, as = as_in, bs = bs_in;
  collapse(g, {&cs, &as, &bs});
  visit_all(t, [&](auto tag) {
    using T = decltype(tag);
    visit_all(ct, [&](auto ctag) {
      using C = decltype(ctag);
      where_kernel<T, C><<<grid_for(n), kThreads>>>(static_cast<T*>(out), static_cast<const C*>(c), cs,
                                                    static_cast<const T*>(a), as, static_cast<const T*>(b), bs, g, n);
    });
  });
  RELPOS_LAUNCH_CHECK("where");
}

void add_inplace(DT t, void* dst, const Strides& ds_in, const void* src, const Strides& ss_in, const Geom& g_in,
                 double alpha) {
  const int64_t n = numel(g_in);
  if (n == 0) return;
  Geom g = g_in;
  Strides ds = ds_in, ss = ss_in;
  collapse(g, {&ds, &ss});
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    add_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(dst), ds, static_cast<const T*>(src), ss, g, n,
                                             T(alpha));
  });
  RELPOS_LAUNCH_CHECK("add_");
}

void mul_inplace(DT t, void* dst, const Strides& ds_in, const Geom& g_in, double s) {
  const int64_t n = numel(g_in);
  if (n == 0) return;
  Geom g = g_in;
  Strides ds = ds_in;
  collapse(g, {&ds});
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    mul_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(dst), ds, g, n, T(s));
  });
  RELPOS_LAUNCH_CHECK("mul_");
}

}  // namespace relpos::k::cuda::dev
