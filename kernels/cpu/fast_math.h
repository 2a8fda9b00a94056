// kernels/cpu/fast_math.h — a float32 exp that the compiler can vectorise (std::expf is a
// scalar libm call), and a float64 one (exp_f64, below). Cephes' expf scheme: n = round(x log2 e),
// r = x - n ln2 (ln2 split in two parts), exp(r) by a degree-6 polynomial, times 2^n built in the
// exponent bits. Relative error within 3e-7 of std::exp on [-87.3, 88.7] (tested); below -87.3
// (and for -inf, i.e. masked logits) it returns exactly 0; NaN gives NaN.
// gelu_erf_f32 / gelu_erf_grad_f32: the exact (erf) GELU and its derivative without libm's
// scalar erff, vectorisable like exp_f32 (see below); tanh_f32 likewise for tanhf.
#pragma once
#include <bit>
#include <cstdint>
#include <limits>

namespace relpos::k::fast {

// The max m of a[0..n) as an OpenMP simd max reduction computed it. That reduction starts from
// the type's lowest *finite* value under clang (-inf under GCC), so a fully masked row (every
// entry -inf) comes out as lowest instead of -inf. Returns what a serial max gives: -inf for
// such a row (a scan only when m is at lowest).
template <typename T>
inline T simd_max_fixup(T m, const T* a, int64_t n) {
  if (m > std::numeric_limits<T>::lowest()) return m;
  for (int64_t i = 0; i < n; ++i)
    if (a[i] > -std::numeric_limits<T>::infinity()) return m;  // an entry is lowest itself
  return -std::numeric_limits<T>::infinity();
}

// exp_f32's constants, also used by the fused attention's 16-lane exp (kernels/cpu/attention.cpp):
// log2 e, ln 2 in two parts (the high one exact in a few bits) and the polynomial of exp(r),
// highest coefficient first.
inline constexpr float kExpLog2e = 1.44269504088896341f, kExpLn2Hi = 0.693359375f, kExpLn2Lo = -2.12194440e-4f;
inline constexpr float kExpPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                      4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

inline float exp_f32(float x) {
  const bool underflow = x < -87.3f;
  x = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
  const float n = __builtin_floorf(x * kExpLog2e + 0.5f);
  float r = x - n * kExpLn2Hi;
  r = r - n * kExpLn2Lo;
  float p = kExpPoly[0];
  p = p * r + kExpPoly[1];
  p = p * r + kExpPoly[2];
  p = p * r + kExpPoly[3];
  p = p * r + kExpPoly[4];
  p = p * r + kExpPoly[5];
  const float y = p * r * r + r + 1.0f;  // NaN for a NaN x
  // The exponent bits from a finite n: converting NaN to an integer is undefined behaviour
  // (clang's UBSan reports it); y carries the NaN.
  const float n_finite = n == n ? n : 0.0f;
  const float scale = std::bit_cast<float>(static_cast<int32_t>(n_finite + 127.0f) << 23);
  return underflow ? 0.0f : y * scale;
}

// exp for float64, vectorisable like exp_f32 (libm's exp is a scalar call): n = round(x log2 e),
// r = x - n ln2 (ln2 split in two, the high part with trailing zeros so n ln2_hi is exact),
// exp(r) by its Taylor series to degree 13 in Horner form (|r| <= ln2 / 2: truncation below
// 1e-17 relative), times 2^(n-1) built in the exponent bits, times 2. Within 3e-16 relative of
// std::exp on [-707, 709.78] (tested); below -707 (and for -inf) it returns exactly 0 (no results
// below 1e-307), above 709.78 +inf; NaN gives NaN. For float32 kernels that sum in float64
// (cross entropy).
inline double exp_f64(double x) {
  const bool underflow = x < -707.0;
  const bool overflow = x > 709.78;
  x = x < -707.0 ? -707.0 : (x > 709.78 ? 709.78 : x);
  const double n = __builtin_floor(x * 1.4426950408889634074 + 0.5);  // -1020 .. 1024
  double r = __builtin_fma(-n, 6.93147180369123816490e-01, x);
  r = __builtin_fma(-n, 1.90821492927058770002e-10, r);
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = __builtin_fma(p, r, 1.0 / 479001600.0);
  p = __builtin_fma(p, r, 1.0 / 39916800.0);
  p = __builtin_fma(p, r, 1.0 / 3628800.0);
  p = __builtin_fma(p, r, 1.0 / 362880.0);
  p = __builtin_fma(p, r, 1.0 / 40320.0);
  p = __builtin_fma(p, r, 1.0 / 5040.0);
  p = __builtin_fma(p, r, 1.0 / 720.0);
  p = __builtin_fma(p, r, 1.0 / 120.0);
  p = __builtin_fma(p, r, 1.0 / 24.0);
  p = __builtin_fma(p, r, 1.0 / 6.0);
  p = __builtin_fma(p, r, 0.5);
  p = __builtin_fma(p, r * r, r);            // r + r^2 (1/2 + r/6 + ...)
  const double y = 1.0 + p;                  // NaN for a NaN x
  const double n_finite = n == n ? n : 0.0;  // (converting NaN to an integer is undefined behaviour)
  const double half_scale = std::bit_cast<double>(static_cast<int64_t>(n_finite + 1022.0) << 52);  // 2^(n-1)
  return underflow ? 0.0 : overflow ? std::numeric_limits<double>::infinity() : y * half_scale * 2.0;
}

// x^2 = hi + lo exactly (Dekker: x split into two 12-bit halves, each partial product exact).
inline void square_f32(float x, float& hi, float& lo) {
  hi = x * x;
  const float c = 4097.0f * x;
  const float xh = c - (c - x), xl = x - xh;
  lo = ((xh * xh - hi) + 2.0f * xh * xl) + xl * xl;
}

// 2 Phi(x) = 1 + erf(x / sqrt 2) and, in phi, the normal density exp(-x^2 / 2) / sqrt(2 pi).
// Through erfc so that the result has a small *relative* error on both sides: 2 - erfc(z)
// for x >= 0, erfc(z) for x < 0, z = |x| / sqrt 2, with erfc(z) = t R(t) exp(-z^2),
// t = 1 / (1 + z / 2): R is a degree-10 polynomial fitted to erfc(z) exp(z^2) / t (the scaled
// complementary error function) on t in [0.1503, 1], i.e. |x| <= 16, by relative least squares
// against 30-digit mpmath values (1.9e-7 relative with float32 Horner). One exp, shared by Phi and
// phi: exp(-z^2) = exp(-x^2 / 2) is taken from the exact square (hi + lo) as
// exp(-hi / 2) (1 - lo / 2) (|lo| <= ulp(x^2) / 2): rounding x^2 would cost ~x^2 ulp of relative
// error in the tail. (Numerical Recipes' erfcc, used before, writes the same t-expansion as
// exp(P(t)) and so needed a second exp.) Within 1e-6 relative of float64 (tested).
inline float two_phi_f32(float x, float* phi = nullptr) {
  // The clamp as two selects and |x| as a cleared sign bit: the vectoriser turns them into a max, a
  // min and an and (a nested select and (x < 0 ? -x : x) made GCC 12 evaluate the polynomial for
  // both signs and blend: 0.97 ns a value instead of 0.69, hot, one thread).
  x = x < -16.0f ? -16.0f : x;  // erfc(16 / sqrt 2) underflows; keeps inf out of Dekker
  x = x > 16.0f ? 16.0f : x;
  float hi, lo;
  square_f32(x, hi, lo);
  const float z = std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0x7fffffffu) * 0.70710678118654752f;
  const float t = 1.0f / (1.0f + 0.5f * z);
  float r = 3.839082271e-02f;
  r = r * t - 2.057284713e-01f;
  r = r * t + 4.174175262e-01f;
  r = r * t - 3.402777016e-01f;
  r = r * t + 2.337212674e-02f;
  r = r * t + 8.550760336e-03f;
  r = r * t + 6.552905589e-02f;
  r = r * t + 1.828070730e-01f;
  r = r * t + 2.456393987e-01f;
  r = r * t + 2.822091579e-01f;
  r = r * t + 2.820902765e-01f;
  const float gauss = exp_f32(-0.5f * hi) * (1.0f - 0.5f * lo);  // exp(-x^2 / 2)
  const float erfc = t * r * gauss;
  if (phi) *phi = 0.39894228040143268f * gauss;
  return x < 0.0f ? erfc : 2.0f - erfc;
}

// tanh for float32, vectorisable like exp_f32 (libm's tanhf is a scalar call, ~45 cycles a value:
// softcap's tanh over [B, H, L, L] scores and the tanh-GELU ran 19x slower than the erf-GELU).
// |x| < 0.625: x + x^3 P(x^2), P of degree 4 fitted by relative least squares against float64
// tanh (8.1e-8 relative with float32 Horner); else sign(x) (1 - 2 / (exp(2|x|) + 1)) with
// exp_f32 (no cancellation there: tanh >= 0.55; exp_f32's 3e-7 gives at most ~3e-7). Within
// 4e-7 relative of float64 (tested); +-1 from |x| > 9.01 on, NaN gives NaN.
inline float tanh_f32(float x) {
  const float a = std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0x7fffffffu);  // |x| (see two_phi_f32)
  const float u = x * x;
  float p = -5.691935767074693e-03f;
  p = p * u + 2.062624866510832e-02f;
  p = p * u - 5.3735306102097036e-02f;
  p = p * u + 1.3331381207586818e-01f;
  p = p * u - 3.3333279203178173e-01f;
  const float small = x + x * u * p;
  const float e = exp_f32(2.0f * (a > 44.0f ? 44.0f : a));  // exp(88) is finite; tanh(44) rounds to 1
  const float large = 1.0f - 2.0f / (e + 1.0f);
  return a < 0.625f ? small : (x < 0.0f ? -large : large);  // NaN: a < 0.625 is false, large is NaN
}

// gelu(x) = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
inline float gelu_erf_f32(float x) { return 0.5f * x * two_phi_f32(x); }

// gelu'(x) = Phi(x) + x phi(x)
inline float gelu_erf_grad_f32(float x) {
  float phi;
  const float two_phi = two_phi_f32(x, &phi);
  return 0.5f * two_phi + x * phi;
}

// Both from one two_phi_f32 (a GEMM epilogue that saves the derivative): the same two values as
// the functions above, for half the work.
inline void gelu_erf_and_grad_f32(float x, float& y, float& dy) {
  float phi;
  const float two_phi = two_phi_f32(x, &phi);
  y = 0.5f * x * two_phi;
  dy = 0.5f * two_phi + x * phi;
}

}  // namespace relpos::k::fast
