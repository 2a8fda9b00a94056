// kernels/cpu/tile_gemm.cpp — register-blocked micro-kernels for the fused attention's tiles
// (contract and ISA choice in kernels/cpu/tile_gemm.h).
//
// A block of MR rows x NR columns of C lives in registers for the whole K loop: per k, NR/W
// vector loads of B's row k, MR broadcasts of A(i, k) and MR * NR/W FMAs (W floats a vector).
// Rows past M are a smaller MR (one instantiation per count); columns past N are masked, so
// nothing outside the operands is read or written. The functions carry their ISA as a target
// attribute and run only after the CPU was checked for it (tile_isa_supported).
#include "kernels/cpu/tile_gemm.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "kernels/ops.h"

namespace relpos::k::cpu {

namespace {

#define RELPOS_UNROLL _Pragma("GCC unroll 16")

// ---------------------------------------------------------------- scalar reference
void tile_scalar(const TileGemm& g) {
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t j = 0; j < g.N; ++j) {
      float acc = 0;
      for (int64_t k = 0; k < g.K; ++k) acc = std::fma(g.a[i * g.a_rs + k * g.a_cs], g.b[k * g.ldb + j], acc);
      float* cij = g.c + i * g.ldc + j;
      *cij = std::fma(g.alpha, acc, g.accumulate ? *cij : 0.0f);
    }
}

// ---------------------------------------------------------------- AVX-512: MR x 32
constexpr int kMr512 = 12;

template <int MR>
__attribute__((target("avx512f,fma"))) void block512(const TileGemm& g, int64_t i0, int64_t j0, __mmask16 m0,
                                                     __mmask16 m1) {
  __m512 acc0[MR], acc1[MR];
  RELPOS_UNROLL for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  const float* a = g.a + i0 * g.a_rs;
  const float* b = g.b + j0;
  for (int64_t k = 0; k < g.K; ++k) {
    const float* bk = b + k * g.ldb;
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, bk);
    const __m512 b1 = _mm512_maskz_loadu_ps(m1, bk + 16);
    const float* ak = a + k * g.a_cs;
    RELPOS_UNROLL for (int r = 0; r < MR; ++r) {
      const __m512 ar = _mm512_set1_ps(ak[r * g.a_rs]);
      acc0[r] = _mm512_fmadd_ps(ar, b0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(ar, b1, acc1[r]);
    }
  }
  const __m512 alpha = _mm512_set1_ps(g.alpha);
  RELPOS_UNROLL for (int r = 0; r < MR; ++r) {
    float* cr = g.c + (i0 + r) * g.ldc + j0;
    const __m512 c0 = g.accumulate ? _mm512_maskz_loadu_ps(m0, cr) : _mm512_setzero_ps();
    const __m512 c1 = g.accumulate ? _mm512_maskz_loadu_ps(m1, cr + 16) : _mm512_setzero_ps();
    _mm512_mask_storeu_ps(cr, m0, _mm512_fmadd_ps(alpha, acc0[r], c0));
    _mm512_mask_storeu_ps(cr + 16, m1, _mm512_fmadd_ps(alpha, acc1[r], c1));
  }
}

template <int MR>
void rows512(const TileGemm& g, int64_t i0, int64_t rows, int64_t j0, __mmask16 m0, __mmask16 m1) {
  if constexpr (MR > 0) {
    if (rows == MR) return block512<MR>(g, i0, j0, m0, m1);
    rows512<MR - 1>(g, i0, rows, j0, m0, m1);
  }
}

__mmask16 mask16(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

void tile_avx512(const TileGemm& g) {
  for (int64_t j0 = 0; j0 < g.N; j0 += 32) {
    const __mmask16 m0 = mask16(g.N - j0), m1 = mask16(g.N - j0 - 16);
    int64_t i0 = 0;
    for (; i0 + kMr512 <= g.M; i0 += kMr512) block512<kMr512>(g, i0, j0, m0, m1);
    if (i0 < g.M) rows512<kMr512 - 1>(g, i0, g.M - i0, j0, m0, m1);
  }
}

// ---------------------------------------------------------------- AVX2: MR x 16
constexpr int kMr256 = 6;

__attribute__((target("avx2,fma"))) __m256i mask8(int64_t n) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int nn = n <= 0 ? 0 : n >= 8 ? 8 : int(n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(nn), lanes);
}

template <int MR>
__attribute__((target("avx2,fma"))) void block256(const TileGemm& g, int64_t i0, int64_t j0, int64_t n) {
  const __m256i m0 = mask8(n), m1 = mask8(n - 8);
  __m256 acc0[MR], acc1[MR];
  RELPOS_UNROLL for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  const float* a = g.a + i0 * g.a_rs;
  const float* b = g.b + j0;
  for (int64_t k = 0; k < g.K; ++k) {
    const float* bk = b + k * g.ldb;
    const __m256 b0 = _mm256_maskload_ps(bk, m0);
    const __m256 b1 = _mm256_maskload_ps(bk + 8, m1);
    const float* ak = a + k * g.a_cs;
    RELPOS_UNROLL for (int r = 0; r < MR; ++r) {
      const __m256 ar = _mm256_broadcast_ss(ak + r * g.a_rs);
      acc0[r] = _mm256_fmadd_ps(ar, b0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(ar, b1, acc1[r]);
    }
  }
  const __m256 alpha = _mm256_set1_ps(g.alpha);
  RELPOS_UNROLL for (int r = 0; r < MR; ++r) {
    float* cr = g.c + (i0 + r) * g.ldc + j0;
    const __m256 c0 = g.accumulate ? _mm256_maskload_ps(cr, m0) : _mm256_setzero_ps();
    const __m256 c1 = g.accumulate ? _mm256_maskload_ps(cr + 8, m1) : _mm256_setzero_ps();
    _mm256_maskstore_ps(cr, m0, _mm256_fmadd_ps(alpha, acc0[r], c0));
    _mm256_maskstore_ps(cr + 8, m1, _mm256_fmadd_ps(alpha, acc1[r], c1));
  }
}

template <int MR>
void rows256(const TileGemm& g, int64_t i0, int64_t rows, int64_t j0, int64_t n) {
  if constexpr (MR > 0) {
    if (rows == MR) return block256<MR>(g, i0, j0, n);
    rows256<MR - 1>(g, i0, rows, j0, n);
  }
}

void tile_avx2(const TileGemm& g) {
  for (int64_t j0 = 0; j0 < g.N; j0 += 16) {
    int64_t i0 = 0;
    for (; i0 + kMr256 <= g.M; i0 += kMr256) block256<kMr256>(g, i0, j0, g.N - j0);
    if (i0 < g.M) rows256<kMr256 - 1>(g, i0, g.M - i0, j0, g.N - j0);
  }
}

// ---------------------------------------------------------------- OpenBLAS
void tile_openblas(const TileGemm& g) {
  const BlasOperand a = blas_operand(g.M, g.K, g.a_rs, g.a_cs);
  cblas_sgemm(CblasRowMajor, a.trans ? CblasTrans : CblasNoTrans, CblasNoTrans, int(g.M), int(g.N), int(g.K), g.alpha,
              g.a, int(a.ld), g.b, int(std::max<int64_t>({g.ldb, g.N, 1})), g.accumulate ? 1.0f : 0.0f, g.c,
              int(std::max<int64_t>({g.ldc, g.N, 1})));
}

TileIsa best_isa() {
  if (tile_isa_supported(TileIsa::Avx512)) return TileIsa::Avx512;
  if (tile_isa_supported(TileIsa::Avx2)) return TileIsa::Avx2;
  return TileIsa::OpenBLAS;
}

}  // namespace

bool tile_isa_supported(TileIsa isa) {
  // The CPU's vector tier as kernels/cpu/blas_core.cpp reads it: 3 = AVX-512 (F, BW, VL, DQ; every
  // such CPU has FMA), 2 = AVX2 + FMA.
  switch (isa) {
    case TileIsa::Avx512:
      return ensure_blas_core().cpu_tier >= 3;
    case TileIsa::Avx2:
      return ensure_blas_core().cpu_tier >= 2;
    case TileIsa::OpenBLAS:
    case TileIsa::Scalar:
      return true;
  }
  return false;
}

const char* tile_isa_name(TileIsa isa) {
  switch (isa) {
    case TileIsa::Avx512:
      return "avx512";
    case TileIsa::Avx2:
      return "avx2";
    case TileIsa::OpenBLAS:
      return "openblas";
    case TileIsa::Scalar:
      return "scalar";
  }
  return "?";
}

TileIsa tile_isa() {
  static const TileIsa isa = [] {
    const char* e = std::getenv("RELPOS_TILE_GEMM");
    if (!e || !*e) return best_isa();
    for (TileIsa t : {TileIsa::Avx512, TileIsa::Avx2, TileIsa::OpenBLAS})
      if (std::strcmp(e, tile_isa_name(t)) == 0) {
        RELPOS_CHECK(tile_isa_supported(t), "RELPOS_TILE_GEMM={}: this CPU does not run {} instructions", e, e);
        return t;
      }
    ::relpos::fail("RELPOS_TILE_GEMM={}: expected 'avx512', 'avx2' or 'openblas'", e);
  }();
  return isa;
}

void tile_gemm(TileIsa isa, const TileGemm& g) {
  if (g.M <= 0 || g.N <= 0) return;
  RELPOS_CHECK(tile_isa_supported(isa), "tile_gemm: this CPU does not run {} instructions", tile_isa_name(isa));
  switch (isa) {
    case TileIsa::Avx512:
      return tile_avx512(g);
    case TileIsa::Avx2:
      return tile_avx2(g);
    case TileIsa::OpenBLAS:
      ensure_blas_core();
      return tile_openblas(g);
    case TileIsa::Scalar:
      return tile_scalar(g);
  }
}

void tile_gemm(const TileGemm& g) {
  tile_gemm(tile_isa(), g);
}

}  // namespace relpos::k::cpu

namespace relpos::k {

std::string cpu_attention_tile_path() {
  const cpu::TileIsa isa = cpu::tile_isa();
  const char* forced = std::getenv("RELPOS_TILE_GEMM");
  const std::string how = forced && *forced ? " [RELPOS_TILE_GEMM]" : "";
  switch (isa) {
    case cpu::TileIsa::Avx512:
      return "avx512 micro-kernels (12 x 32 blocks)" + how;
    case cpu::TileIsa::Avx2:
      return "avx2 micro-kernels (6 x 16 blocks)" + how;
    case cpu::TileIsa::OpenBLAS:
      return "OpenBLAS sgemm per tile (" + ensure_blas_core().core + " kernels)" +
             (how.empty() ? ": this CPU has no AVX2 + FMA" : how);
    case cpu::TileIsa::Scalar:
      return "scalar";
  }
  return "?";
}

}  // namespace relpos::k
