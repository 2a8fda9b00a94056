// kernels/cpu/unary_value.h — the value of each pointwise op (k::Unary) on one element, and
// visit_unary (the runtime op to a template parameter): shared by the elementwise loops
// (kernels/cpu/elementwise.cpp) and the GEMM's activation epilogue (kernels/cpu/gemm.cpp), so
// that an activation fused into a GEMM computes the same bits as k::unary / k::unary_grad.
#pragma once
#include <cmath>
#include <type_traits>

#include "core/float16.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/ops.h"

namespace relpos::k::cpu {

// The op is a template parameter, so each loop below is specialised and
// inlined.
template <Unary op, typename T>
inline T unary_value(T x, [[maybe_unused]] T p, [[maybe_unused]] T q) {
  [[maybe_unused]] constexpr T kSqrt2OverPi = T(0.7978845608028654);  // sqrt(2/pi)
  [[maybe_unused]] constexpr T kC = T(0.044715);
  [[maybe_unused]] constexpr T kInvSqrt2 = T(0.7071067811865476);
  [[maybe_unused]] constexpr T kInvSqrt2Pi = T(0.3989422804014327);  // 1/sqrt(2 pi)
  if constexpr (op == Unary::Neg) return -x;
  if constexpr (op == Unary::Exp) return std::exp(x);
  if constexpr (op == Unary::Log) return std::log(x);
  if constexpr (op == Unary::Sqrt) return std::sqrt(x);
  if constexpr (op == Unary::Rsqrt) return T(1) / std::sqrt(x);
  if constexpr (op == Unary::Abs) return std::abs(x);
  if constexpr (op == Unary::Sign) return T((x > 0) - (x < 0));
  if constexpr (op == Unary::Floor) return std::floor(x);
  if constexpr (op == Unary::Ceil) return std::ceil(x);
  if constexpr (op == Unary::Tanh) {
    if constexpr (std::is_same_v<T, float>)
      return fast::tanh_f32(x);  // vectorisable; float64 keeps libm
    else
      return std::tanh(x);
  }
  if constexpr (op == Unary::Sigmoid) return T(1) / (T(1) + std::exp(-x));
  if constexpr (op == Unary::Relu) return x > 0 ? x : T(0);
  if constexpr (op == Unary::GeluTanh) {
    T t = unary_value<Unary::Tanh>(kSqrt2OverPi * (x + kC * x * x * x), T(0), T(0));
    return T(0.5) * x * (T(1) + t);
  }
  if constexpr (op == Unary::GeluErf) {
    if constexpr (std::is_same_v<T, float>)
      return fast::gelu_erf_f32(x);  // vectorisable; float64 keeps libm
    else
      return T(0.5) * x * (T(1) + std::erf(x * kInvSqrt2));
  }
  if constexpr (op == Unary::Silu) return x / (T(1) + std::exp(-x));
  if constexpr (op == Unary::ReluGrad) return x > 0 ? T(1) : T(0);
  if constexpr (op == Unary::GeluTanhGrad) {
    T t = unary_value<Unary::Tanh>(kSqrt2OverPi * (x + kC * x * x * x), T(0), T(0));
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * kSqrt2OverPi * (T(1) + T(3) * kC * x * x);
  }
  if constexpr (op == Unary::GeluErfGrad) {
    if constexpr (std::is_same_v<T, float>)
      return fast::gelu_erf_grad_f32(x);
    else
      return T(0.5) * (T(1) + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(T(-0.5) * x * x);
  }
  if constexpr (op == Unary::SiluGrad) {
    T s = T(1) / (T(1) + std::exp(-x));
    return s * (T(1) + x * (T(1) - s));
  }
  if constexpr (op == Unary::TanhGradFromY) return T(1) - x * x;
  if constexpr (op == Unary::SigmoidGradFromY) return x * (T(1) - x);
  if constexpr (op == Unary::AddScalar) return x + p;
  if constexpr (op == Unary::MulScalar) return x * p;
  if constexpr (op == Unary::PowScalar) return std::pow(x, p);
  if constexpr (op == Unary::RPowScalar) return std::pow(p, x);
  if constexpr (op == Unary::Clamp) return x < p ? p : (x > q ? q : x);
  if constexpr (op == Unary::ClampMask) return (x >= p && x <= q) ? T(1) : T(0);
  if constexpr (op == Unary::RoundBF16) return T(round_to_bf16(float(x)));
  if constexpr (op == Unary::RoundFP16) return T(round_to_fp16(float(x)));
  return x;
}

#define RELPOS_UNARY_OPS(X)                                                                                      \
  X(Neg)                                                                                                         \
  X(Exp)                                                                                                         \
  X(Log)                                                                                                         \
  X(Sqrt)                                                                                                        \
  X(Rsqrt) X(Abs) X(Sign) X(Tanh) X(Sigmoid) X(Relu) X(GeluTanh) X(GeluErf) X(Silu) X(Floor) X(Ceil) X(ReluGrad) \
      X(GeluTanhGrad) X(GeluErfGrad) X(SiluGrad) X(TanhGradFromY) X(SigmoidGradFromY) X(AddScalar) X(MulScalar)  \
          X(PowScalar) X(RPowScalar) X(Clamp) X(ClampMask) X(RoundBF16) X(RoundFP16)

// f.template operator()<Unary::OP>() for the runtime op.
template <typename F>
void visit_unary(Unary op, F&& f) {
  switch (op) {
#define RELPOS_CASE(name)                 \
  case Unary::name:                       \
    f.template operator()<Unary::name>(); \
    return;
    RELPOS_UNARY_OPS(RELPOS_CASE)
#undef RELPOS_CASE
  }
  fail("unary: unknown op {}", int(op));
}

#undef RELPOS_UNARY_OPS

// An activation A (is_activation) and its derivative at x: unary_value<A> and
// unary_value<derivative_of(A)>, the float32 GELU's from one evaluation of their shared Phi.
template <Unary A, typename T>
inline void activation_and_grad(T x, T& y, T& dy) {
  if constexpr (A == Unary::GeluErf && std::is_same_v<T, float>) {
    fast::gelu_erf_and_grad_f32(x, y, dy);
  } else {
    dy = unary_value<derivative_of(A)>(x, T(0), T(0));
    y = unary_value<A>(x, T(0), T(0));
  }
}

// The float32 GELU (erf) of a contiguous run, y and / or dy (either may be null; y may be x), in its
// 16-lane form (fast::gelu_erf_run: the values of unary_value<GeluErf> / <GeluErfGrad> and of
// activation_and_grad): true for float32; false, nothing done, for other types (k::unary and the
// GEMM's epilogue then take their per-element loops).
template <typename T>
bool gelu_erf_run_if_f32(const T* x, T* y, T* dy, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    fast::gelu_erf_run(x, y, dy, n);
    return true;
  } else {
    (void)x, (void)y, (void)dy, (void)n;
    return false;
  }
}

}  // namespace relpos::k::cpu
