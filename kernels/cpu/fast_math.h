// kernels/cpu/fast_math.h — a float32 exp that the compiler can vectorise (std::expf is a
// scalar libm call), and a float64 one (exp_f64, below). Cephes' expf scheme: n = round(x log2 e),
// r = x - n ln2 (ln2 split in two parts), exp(r) by a degree-6 polynomial, times 2^n built in the
// exponent bits. Relative error within 3e-7 of std::exp on [-87.3, 88.7] (tested); below -87.3
// (and for -inf, i.e. masked logits) it returns exactly 0; NaN gives NaN.
// gelu_erf_f32 / gelu_erf_grad_f32: the exact (erf) GELU and its derivative without libm's
// scalar erff, vectorisable like exp_f32 (see below); tanh_f32 likewise for tanhf.
#pragma once
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

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
// exp(-x^2 / 2) is taken as 0 from x^2 > kGaussFlush = 160 (|x| > 12.65) on: there erfc(z) < 2^-118,
// so 2 Phi is 2 and gelu' 1 for x > 0 either way, and for x < 0 gelu (below 1e-35) and gelu' (below
// 1e-34 in magnitude) become 0. Without the flush, |x| in [12.98, 13.21] (exp_f32 flushes only below -87.3) made erfc
// and erfc / 2 subnormal: microcode assists on the whole 16-lane vector, x = -13.1 ran 15.3 ns a value against 0.58
// (N(0, 10^2) pre-activations: 2.2x slower). With it every intermediate is 0 or a normal number (erfc / 2 >= 3e-37
// where not flushed).
inline constexpr float kGaussFlush = 160.0f;
// two_phi_f32's R(t), highest coefficient first (also gelu_erf_and_grad16's, below).
inline constexpr float kTwoPhiPoly[11] = {3.839082271e-02f, -2.057284713e-01f, 4.174175262e-01f, -3.402777016e-01f,
                                          2.337212674e-02f, 8.550760336e-03f,  6.552905589e-02f, 1.828070730e-01f,
                                          2.456393987e-01f, 2.822091579e-01f,  2.820902765e-01f};

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
  float r = kTwoPhiPoly[0];
  for (int i = 1; i < 11; ++i) r = r * t + kTwoPhiPoly[i];
  const float gauss = hi > kGaussFlush ? 0.0f : exp_f32(-0.5f * hi) * (1.0f - 0.5f * lo);  // exp(-x^2 / 2)
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

#if defined(__AVX512F__)
// gelu_erf_and_grad_f32 on 16 lanes, written out in AVX-512 (the compiler's vectorisation of the
// scalar code spent ~1.2 ns a value, hot, one thread; this ~0.65): the same operations in the
// same order, so the same bits — every one of the 2^32 float inputs checked once (NaNs as NaN),
// tests/kernels/test_fast_math.cpp a sweep and the special values — with three rewrites that
// cannot change a bit: the exact square's low part as fma(x, x, -hi) (Dekker's split gives the
// same exact value, |x| <= 16), exp's power of two by vscalefps under the flush mask (x^2 >
// kGaussFlush gives 0, as in two_phi_f32; elsewhere exp's argument -x^2 / 2 is >= -80, so 2^n is
// a normal number and y 2^n one rounding either way), and the clamps as max / min with the bound first
// (a NaN x stays NaN, as the scalar selects keep it).
inline void gelu_erf_and_grad16(__m512 x_in, __m512* y, __m512* dy) {
  // (the masked forms: GCC 12's unmasked max / min read an undefined vector)
  const __mmask16 all = 0xFFFF;
  const __m512 x =
      _mm512_maskz_min_ps(all, _mm512_set1_ps(16.0f), _mm512_maskz_max_ps(all, _mm512_set1_ps(-16.0f), x_in));
  const __m512 hi = _mm512_mul_ps(x, x), lo = _mm512_fmsub_ps(x, x, hi);
  const __m512 abs_x = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
  const __m512 z = _mm512_mul_ps(abs_x, _mm512_set1_ps(0.70710678118654752f));
  const __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(_mm512_set1_ps(0.5f), z, _mm512_set1_ps(1.0f)));
  __m512 r = _mm512_set1_ps(kTwoPhiPoly[0]);
  for (int i = 1; i < 11; ++i) r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(kTwoPhiPoly[i]));
  // exp_f32(-hi / 2)
  const __m512 e = _mm512_mul_ps(_mm512_set1_ps(-0.5f), hi);
  const __mmask16 flush = _mm512_cmp_ps_mask(hi, _mm512_set1_ps(kGaussFlush), _CMP_GT_OQ);  // (NaN: not)
  // n = floor(e log2 e + 1/2)
  const __m512 n = _mm512_mask_roundscale_ps(_mm512_setzero_ps(), all,
                                             _mm512_fmadd_ps(e, _mm512_set1_ps(kExpLog2e), _mm512_set1_ps(0.5f)),
                                             _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 er = _mm512_fnmadd_ps(n, _mm512_set1_ps(kExpLn2Hi), e);
  er = _mm512_fnmadd_ps(n, _mm512_set1_ps(kExpLn2Lo), er);
  __m512 p = _mm512_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, er, _mm512_set1_ps(kExpPoly[i]));
  const __m512 ey = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, er), er, er), _mm512_set1_ps(1.0f));
  const __m512 gauss = _mm512_mul_ps(_mm512_maskz_scalef_ps(_mm512_knot(flush), ey, n),
                                     _mm512_fnmadd_ps(_mm512_set1_ps(0.5f), lo, _mm512_set1_ps(1.0f)));
  const __m512 erfc = _mm512_mul_ps(_mm512_mul_ps(t, r), gauss);
  const __m512 phi = _mm512_mul_ps(_mm512_set1_ps(0.39894228040143268f), gauss);
  const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 two_phi = _mm512_mask_mov_ps(_mm512_sub_ps(_mm512_set1_ps(2.0f), erfc), negative, erfc);
  if (y) *y = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x_in), two_phi);
  if (dy) *dy = _mm512_fmadd_ps(_mm512_set1_ps(0.5f), two_phi, _mm512_mul_ps(x_in, phi));
}
#endif

// y[j] = gelu(x[j]) and dy[j] = gelu'(x[j]) for j < n (either output may be null; y may be x): the
// values of gelu_erf_f32 / gelu_erf_grad_f32, 16 lanes at a time where the CPU has AVX-512 (the
// tail under a mask). The float32 GELU of k::unary and of the GEMM's epilogue.
inline void gelu_erf_run(const float* x, float* y, float* dy, int64_t n) {
#if defined(__AVX512F__)
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1);
    __m512 vy, vdy;
    gelu_erf_and_grad16(_mm512_maskz_loadu_ps(k, x + j), y ? &vy : nullptr, dy ? &vdy : nullptr);
    if (y) _mm512_mask_storeu_ps(y + j, k, vy);
    if (dy) _mm512_mask_storeu_ps(dy + j, k, vdy);
  }
#else
  if (y && dy) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) gelu_erf_and_grad_f32(x[j], y[j], dy[j]);
  } else if (y) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = gelu_erf_f32(x[j]);
  } else if (dy) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) dy[j] = gelu_erf_grad_f32(x[j]);
  }
#endif
}

}  // namespace relpos::k::fast
