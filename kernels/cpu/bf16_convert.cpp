// kernels/cpu/bf16_convert.cpp — see bf16_convert.h.
#include "kernels/cpu/bf16_convert.h"

#include <immintrin.h>

#include <algorithm>

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

#if defined(__x86_64__)
namespace {
// r[0..16) as a 16 x 16 matrix of 32-bit words, transposed in place: r[c] lane q = old r[q] lane c.
RELPOS_BF16_TARGET void transpose16x16(__m512i* r) {
  // (the maskz forms, as in row_pair_words16: GCC 12 warns about the unmasked ones)
  const __mmask16 all = 0xFFFF;
  const __mmask8 all64 = 0xFF;
  __m512i b[16], c[16];
  // b[2k], b[2k + 1]: rows 2k and 2k + 1 interleaved, lane by lane within each 128-bit quarter
  for (int k = 0; k < 8; ++k) {
    b[2 * k] = _mm512_maskz_unpacklo_epi32(all, r[2 * k], r[2 * k + 1]);
    b[2 * k + 1] = _mm512_maskz_unpackhi_epi32(all, r[2 * k], r[2 * k + 1]);
  }
  // c[4k + j], quarter L: column 4L + j of rows 4k .. 4k + 3
  for (int k = 0; k < 4; ++k) {
    c[4 * k] = _mm512_maskz_unpacklo_epi64(all64, b[4 * k], b[4 * k + 2]);
    c[4 * k + 1] = _mm512_maskz_unpackhi_epi64(all64, b[4 * k], b[4 * k + 2]);
    c[4 * k + 2] = _mm512_maskz_unpacklo_epi64(all64, b[4 * k + 1], b[4 * k + 3]);
    c[4 * k + 3] = _mm512_maskz_unpackhi_epi64(all64, b[4 * k + 1], b[4 * k + 3]);
  }
  // column 4L + j: quarter L of c[j], c[4 + j], c[8 + j], c[12 + j], in that order
  for (int j = 0; j < 4; ++j) {
    const __m512i d = _mm512_maskz_shuffle_i32x4(all, c[j], c[4 + j], 0x88),
                  dd = _mm512_maskz_shuffle_i32x4(all, c[8 + j], c[12 + j], 0x88);
    const __m512i e = _mm512_maskz_shuffle_i32x4(all, c[j], c[4 + j], 0xdd),
                  ee = _mm512_maskz_shuffle_i32x4(all, c[8 + j], c[12 + j], 0xdd);
    r[j] = _mm512_maskz_shuffle_i32x4(all, d, dd, 0x88);
    r[4 + j] = _mm512_maskz_shuffle_i32x4(all, e, ee, 0x88);
    r[8 + j] = _mm512_maskz_shuffle_i32x4(all, d, dd, 0xdd);
    r[12 + j] = _mm512_maskz_shuffle_i32x4(all, e, ee, 0xdd);
  }
}

// 16 floats as two 8-double halves added to s[0], s[1] (the maskz forms: GCC 12's
// _mm512_castps512_ps256 and the unmasked extract warn, see row_pair_words16).
RELPOS_BF16_TARGET void add_sums16(__m512d* s, __m512 v) {
  const __mmask8 all8 = 0xFF;
  const __m256 lower = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(__mmask8(0xF), _mm512_castps_pd(v), 0));
  const __m256 upper = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(__mmask8(0xF), _mm512_castps_pd(v), 1));
  s[0] = _mm512_add_pd(s[0], _mm512_maskz_cvtps_pd(all8, lower));
  s[1] = _mm512_add_pd(s[1], _mm512_maskz_cvtps_pd(all8, upper));
}

// (h's bf16 << 16) | l's bf16, lane by lane: the pair words of two rows.
RELPOS_BF16_TARGET __m512i pair_words16(__m512 h, __m512 l) {
  const __mmask16 all = 0xFFFF;
  return _mm512_or_si512(
      _mm512_maskz_slli_epi32(all, _mm512_maskz_cvtepu16_epi32(all, (__m256i)_mm512_cvtneps_pbh(h)), 16),
      _mm512_maskz_cvtepu16_epi32(all, (__m256i)_mm512_cvtneps_pbh(l)));
}
}  // namespace
#endif

RELPOS_BF16_TARGET void bf16_pair_words_transposed_native(const float* x, int64_t ld, int64_t rows, int64_t cols,
                                                          uint32_t* out, int64_t ldo) {
#if defined(__x86_64__)
  const int64_t np = (cols + 1) / 2;
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {  // 16 rows of x: 16 words of each row of out
    const int64_t nr = std::min<int64_t>(16, rows - r0);
    const __mmask16 rm = __mmask16((1u << nr) - 1);
    for (int64_t p0 = 0; p0 < np; p0 += 16) {  // 32 columns of x: 16 rows of out
      const int64_t npb = std::min<int64_t>(16, np - p0), c0 = 2 * p0;
      const int64_t nlo = std::clamp<int64_t>(cols - c0, 0, 16), nhi = std::clamp<int64_t>(cols - c0 - 16, 0, 16);
      const __mmask16 mlo = __mmask16((1u << nlo) - 1), mhi = __mmask16((1u << nhi) - 1);
      __m512i r[16];
      for (int64_t q = 0; q < 16; ++q) {
        if (q >= nr) {
          r[q] = _mm512_setzero_si512();
          continue;
        }
        const float* xr = x + (r0 + q) * ld + c0;
        // 32 bf16 in memory order (element 2p in a word's low half), each word rotated to put it high
        const __m512i v =
            (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(mhi, xr + 16), _mm512_maskz_loadu_ps(mlo, xr));
        r[q] = _mm512_maskz_ror_epi32(__mmask16(0xFFFF), v, 16);
      }
      transpose16x16(r);
      for (int64_t p = 0; p < npb; ++p) _mm512_mask_storeu_epi32(out + (p0 + p) * ldo + r0, rm, r[p]);
    }
  }
#else
  (void)x, (void)ld, (void)rows, (void)cols, (void)out, (void)ldo;
#endif
}

RELPOS_BF16_TARGET void bf16_col_pair_words_native(const float* x, int64_t ld, int64_t rows, int64_t cols,
                                                   uint32_t* out, int64_t ldo, double* col_sums) {
#if defined(__x86_64__)
  const int64_t np = (rows + 1) / 2;
  for (int64_t i0 = 0; i0 < cols; i0 += 16) {  // 16 columns of x: 16 rows of out
    const int64_t nc = std::min<int64_t>(16, cols - i0);
    const __mmask16 cm = __mmask16((1u << nc) - 1);
    __m512d sums[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()};
    for (int64_t p0 = 0; p0 < np; p0 += 16) {  // 16 pairs of rows: 16 words of each
      const int64_t npb = std::min<int64_t>(16, np - p0);
      __m512i r[16];
      for (int64_t q = 0; q < 16; ++q) {
        if (q >= npb) {
          r[q] = _mm512_setzero_si512();
          continue;
        }
        const int64_t row = 2 * (p0 + q);
        const __m512 h = _mm512_maskz_loadu_ps(cm, x + row * ld + i0);
        const __m512 l = row + 1 < rows ? _mm512_maskz_loadu_ps(cm, x + (row + 1) * ld + i0) : _mm512_setzero_ps();
        if (col_sums) {
          add_sums16(sums, h);
          if (row + 1 < rows) add_sums16(sums, l);
        }
        r[q] = pair_words16(h, l);
      }
      transpose16x16(r);
      const __mmask16 pm = __mmask16((1u << npb) - 1);
      for (int64_t c = 0; c < nc; ++c) _mm512_mask_storeu_epi32(out + (i0 + c) * ldo + p0, pm, r[c]);
    }
    if (col_sums) {
      alignas(64) double s[16];
      _mm512_store_pd(s, sums[0]);
      _mm512_store_pd(s + 8, sums[1]);
      std::copy(s, s + nc, col_sums + i0);
    }
  }
#else
  (void)x, (void)ld, (void)rows, (void)cols, (void)out, (void)ldo, (void)col_sums;
#endif
}

}  // namespace relpos::k::cpu
