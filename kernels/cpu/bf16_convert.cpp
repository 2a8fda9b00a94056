// kernels/cpu/bf16_convert.cpp — see bf16_convert.h.
#include "kernels/cpu/bf16_convert.h"

#include <immintrin.h>

namespace relpos::k::cpu {

bool cpu_converts_bf16() {
#if defined(__x86_64__)
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return ok;
#else
  return false;
#endif
}

#if defined(__x86_64__)
#define RELPOS_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#else
#define RELPOS_BF16_TARGET
#endif

RELPOS_BF16_TARGET void bf16_row_native(const float* src, int64_t n, uint16_t* out) {
#if defined(__x86_64__)
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + j)));
  if (j < n) {
    const __mmask16 m = __mmask16((1u << (n - j)) - 1);
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + j));
    _mm256_mask_storeu_epi16(out + j, m, (__m256i)v);
  }
#else
  (void)src, (void)n, (void)out;
#endif
}

RELPOS_BF16_TARGET void bf16_pair_words_native(const float* src, int64_t n, uint32_t* out) {
#if defined(__x86_64__)
  // 16 floats -> 16 bf16 in memory order, i.e. 8 words with element 2p in the low half; rotating
  // each word by 16 bits puts it in the high half.
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m256i v = (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + j));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j / 2), _mm256_ror_epi32(v, 16));
  }
  if (j < n) {
    const __m256i v = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(__mmask16((1u << (n - j)) - 1), src + j));
    _mm256_mask_storeu_epi32(out + j / 2, __mmask8((1u << ((n - j + 1) / 2)) - 1), _mm256_ror_epi32(v, 16));
  }
#else
  (void)src, (void)n, (void)out;
#endif
}

#if defined(__x86_64__)
namespace {
// 16 + 16 floats (masked) -> two rows of 16 bf16, zero-extended to 32-bit lanes, h's shifted up.
RELPOS_BF16_TARGET __m512i row_pair_words16(__mmask16 m, const float* h, const float* l) {
  const __m256i bh = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, h));
  const __m256i bl = l ? (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, l)) : _mm256_setzero_si256();
  // (the maskz forms: GCC 12 warns that the unmasked ones' undefined pass-through is uninitialised)
  const __mmask16 all = 0xFFFF;
  return _mm512_or_si512(_mm512_maskz_slli_epi32(all, _mm512_maskz_cvtepu16_epi32(all, bh), 16),
                         _mm512_maskz_cvtepu16_epi32(all, bl));
}
}  // namespace
#endif

RELPOS_BF16_TARGET void bf16_row_pair_words_native(const float* hi, const float* lo, int64_t n, uint32_t* out) {
#if defined(__x86_64__)
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    _mm512_storeu_si512(out + j, row_pair_words16(__mmask16(0xFFFF), hi + j, lo ? lo + j : nullptr));
  if (j < n) {
    const __mmask16 tail = __mmask16((1u << (n - j)) - 1);
    _mm512_mask_storeu_epi32(out + j, tail, row_pair_words16(tail, hi + j, lo ? lo + j : nullptr));
  }
#else
  (void)hi, (void)lo, (void)n, (void)out;
#endif
}

}  // namespace relpos::k::cpu
