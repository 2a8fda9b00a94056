// kernels/cpu/tile_gemm.cpp — register-blocked micro-kernels for the fused attention's tiles
// (contract and ISA choice in kernels/cpu/tile_gemm.h).
//
// A block of MR rows x NR columns of C lives in registers for the whole K loop: per k, NR/W
// vector loads of B's row k, MR broadcasts of A(i, k) and MR * NR/W FMAs (W floats a vector).
// Rows past M are a smaller MR (one instantiation per count); columns past N are masked, so
// nothing outside the operands is read or written. The functions carry their ISA as a target
// attribute and run only after the CPU was checked for it (tile_isa_supported).
#include "kernels/cpu/tile_gemm.h"
#include "core/env.h"

#include <cblas.h>
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/float16.h"
#include "kernels/cpu/bf16_convert.h"
#include "kernels/ops.h"

namespace relpos::k::cpu {

namespace {

#define RELPOS_UNROLL _Pragma("GCC unroll 16")
// A lambda inside a target("...") function does not inherit its ISA: without -march=native
// (RELPOS_NATIVE=OFF) its vector arguments and intrinsics need the same target of their own.
#define RELPOS_LAMBDA_ISA(isa) __attribute__((target(isa), always_inline))

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

// Row cr's 32 columns under the masks: C = fma(alpha, acc, C or 0), the last step of every
// AVX-512 kernel (float32, bf16 pairs, AMX).
__attribute__((target("avx512f"), always_inline)) inline void store_row512(float* cr, __mmask16 m0, __mmask16 m1,
                                                                           __m512 alpha, __m512 acc0, __m512 acc1,
                                                                           bool accumulate) {
  const __m512 c0 = accumulate ? _mm512_maskz_loadu_ps(m0, cr) : _mm512_setzero_ps();
  const __m512 c1 = accumulate ? _mm512_maskz_loadu_ps(m1, cr + 16) : _mm512_setzero_ps();
  _mm512_mask_storeu_ps(cr, m0, _mm512_fmadd_ps(alpha, acc0, c0));
  _mm512_mask_storeu_ps(cr + 16, m1, _mm512_fmadd_ps(alpha, acc1, c1));
}

// One MR x 32 block of C. AMode: how A(i, k) is addressed (A row-major, or A^T of a row-major
// matrix: tile_gemm.h), Full: all 32 columns inside N (B's rows loaded without masks). The operand fields are read into
// locals once (inside the k loop the compiler reloaded them from g and chained the row addresses through one register),
// which with the unmasked path measured 13% faster on the attention's tile shapes (hot, 1 thread).
enum class AMode { Rows, Cols };  // a_cs == 1 / a_rs == 1

template <int MR, AMode Mode, bool Full>
__attribute__((target("avx512f,fma"))) void block512(const TileGemm& g, int64_t i0, int64_t j0, __mmask16 m0,
                                                     __mmask16 m1) {
  __m512 acc0[MR], acc1[MR];
  RELPOS_UNROLL for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  const int64_t a_rs = g.a_rs, a_cs = g.a_cs, ldb = g.ldb, K = g.K;
  const float* bk = g.b + j0;
  auto step = [&](const __m512 b0, const __m512 b1, auto a_of) RELPOS_LAMBDA_ISA("avx512f,fma") {
    RELPOS_UNROLL for (int r = 0; r < MR; ++r) {
      const __m512 ar = _mm512_set1_ps(a_of(r));
      acc0[r] = _mm512_fmadd_ps(ar, b0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(ar, b1, acc1[r]);
    }
  };
  auto load_b = [&](const float* p, __m512& b0, __m512& b1) RELPOS_LAMBDA_ISA("avx512f,fma") {
    if constexpr (Full) {
      b0 = _mm512_loadu_ps(p), b1 = _mm512_loadu_ps(p + 16);
    } else {
      b0 = _mm512_maskz_loadu_ps(m0, p), b1 = _mm512_maskz_loadu_ps(m1, p + 16);
    }
  };
  if constexpr (Mode == AMode::Cols) {  // A(i0 + r, k) = ak[r]: MR contiguous floats per k
    const float* ak = g.a + i0;
    for (int64_t k = 0; k < K; ++k, bk += ldb, ak += a_cs) {
      __m512 b0, b1;
      load_b(bk, b0, b1);
      step(b0, b1, [&](int r) { return ak[r]; });
    }
  } else {  // a row pointer per row of the block
    const float* ar[MR];
    RELPOS_UNROLL for (int r = 0; r < MR; ++r) ar[r] = g.a + (i0 + r) * a_rs;
    for (int64_t k = 0; k < K; ++k, bk += ldb) {
      __m512 b0, b1;
      load_b(bk, b0, b1);
      step(b0, b1, [&](int r) { return ar[r][k]; });
    }
  }
  const __m512 alpha = _mm512_set1_ps(g.alpha);
  float* cr = g.c + i0 * g.ldc + j0;
  const int64_t ldc = g.ldc;
  const bool accumulate = g.accumulate;
  RELPOS_UNROLL for (int r = 0; r < MR; ++r, cr += ldc)
      store_row512(cr, m0, m1, alpha, acc0[r], acc1[r], accumulate);  // (masks all-ones when Full)
}

// The AVX-512 kernels' walk over C (float32 and bf16 pairs alike): blocks of 32 columns (the
// second 16 masked past N); in each, the M rows in ceil(M / kMr512) blocks of near-equal height
// (64 rows: 11, 11, 11, 11, 10, 10), each run by the Kernel::block<MR> instantiation of its
// count. (12-row blocks and a 4-row tail: the tail's 8 accumulators cannot hide the FMA latency;
// measured 0-3% slower on the attention's 64-row tiles, hot, 1 thread.)
template <typename Kernel, int MR, typename G>
void rows512(const G& g, int64_t i0, int64_t rows, int64_t j0, __mmask16 m0, __mmask16 m1) {
  if constexpr (MR > 0) {
    if (rows == MR) return Kernel::template block<MR>(g, i0, j0, m0, m1);
    rows512<Kernel, MR - 1>(g, i0, rows, j0, m0, m1);
  }
}

__mmask16 mask16(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// M rows in ceil(M / max_rows) blocks of near-equal height, in order: f(i0, rows) for each.
template <typename F>
void row_blocks(int64_t M, int64_t max_rows, F f) {
  const int64_t nb = (M + max_rows - 1) / max_rows, base = M / nb, extra = M % nb;
  for (int64_t q = 0, i0 = 0; q < nb; ++q) {
    const int64_t rows = base + (q < extra ? 1 : 0);
    f(i0, rows);
    i0 += rows;
  }
}

template <typename Kernel, typename G>
void walk512(const G& g) {
  for (int64_t j0 = 0; j0 < g.N; j0 += 32) {
    const __mmask16 m0 = mask16(g.N - j0), m1 = mask16(g.N - j0 - 16);
    row_blocks(g.M, kMr512, [&](int64_t i0, int64_t rows) { rows512<Kernel, kMr512>(g, i0, rows, j0, m0, m1); });
  }
}

template <AMode Mode>
struct Float32Blocks {
  template <int MR>
  static void block(const TileGemm& g, int64_t i0, int64_t j0, __mmask16 m0, __mmask16 m1) {
    if (m0 == 0xFFFF && m1 == 0xFFFF) return block512<MR, Mode, true>(g, i0, j0, m0, m1);
    block512<MR, Mode, false>(g, i0, j0, m0, m1);
  }
};

void tile_avx512(const TileGemm& g) {
  if (g.a_cs == 1) return walk512<Float32Blocks<AMode::Rows>>(g);
  walk512<Float32Blocks<AMode::Cols>>(g);
}

// ---------------------------------------------------------------- AVX512-BF16 pairs: MR x 32
// Per pair p: two 16-word loads of B's pair row p, MR broadcasts of A's word (i, p) and MR * 2
// vdpbf16ps, each two steps of the float32 sequence (high product first, tile_gemm.h).
template <int MR>
__attribute__((target("avx512f,avx512bf16"))) void pairs512(const TilePairs& g, int64_t i0, int64_t j0, __mmask16 m0,
                                                            __mmask16 m1) {
  __m512 acc0[MR], acc1[MR];
  RELPOS_UNROLL for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  const uint32_t* a = g.a + i0 * g.a_rs;
  const uint32_t* b = g.b + j0;
  for (int64_t p = 0; p < g.pairs; ++p) {
    const uint32_t* bp = b + p * g.ldb;
    const __m512bh b0 = (__m512bh)_mm512_maskz_loadu_epi32(m0, bp);
    const __m512bh b1 = (__m512bh)_mm512_maskz_loadu_epi32(m1, bp + 16);
    const uint32_t* ap = a + p * g.a_ps;
    RELPOS_UNROLL for (int r = 0; r < MR; ++r) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(int(ap[r * g.a_rs]));
      acc0[r] = _mm512_dpbf16_ps(acc0[r], ar, b0);
      acc1[r] = _mm512_dpbf16_ps(acc1[r], ar, b1);
    }
  }
  const __m512 alpha = _mm512_set1_ps(g.alpha);
  RELPOS_UNROLL for (int r = 0; r < MR; ++r)
      store_row512(g.c + (i0 + r) * g.ldc + j0, m0, m1, alpha, acc0[r], acc1[r], g.accumulate);
}

struct PairBlocks {
  template <int MR>
  static void block(const TilePairs& g, int64_t i0, int64_t j0, __mmask16 m0, __mmask16 m1) {
    pairs512<MR>(g, i0, j0, m0, m1);
  }
};

void pairs_avx512(const TilePairs& g) {
  walk512<PairBlocks>(g);
}

// ---------------------------------------------------------------- AMX-BF16 pairs: 32 x 32 blocks
// Tiles of 16 rows x 16 pair words (64 bytes): A's rows hold pairs along K, B's rows are pairs
// (the layout pack_* already produce), C is 16 x 16 floats. Four accumulators (tmm0-3) over a
// 32 x 32 block of C, A in tmm4-5, B in tmm6-7; K in steps of 16 pairs. Each tdpbf16ps sums
// the step's even and odd products apart and adds them to the accumulator (Intel SDM): float32
// accumulation in another order than the avx512 kernels' fma sequence (tile_gemm.h).
struct alignas(64) AmxConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

template <int MI, int NJ>
__attribute__((target("amx-tile,amx-bf16"))) void amx_block(const uint32_t* a, int64_t lda, const uint32_t* b,
                                                            int64_t ldb, int64_t pairs, float* c) {
  _tile_zero(0);
  if constexpr (NJ > 1) _tile_zero(1);
  if constexpr (MI > 1) _tile_zero(2);
  if constexpr (MI > 1 && NJ > 1) _tile_zero(3);
  for (int64_t p = 0; p < pairs; p += 16) {
    _tile_loadd(4, a + p, lda * 4);
    if constexpr (MI > 1) _tile_loadd(5, a + 16 * lda + p, lda * 4);
    _tile_loadd(6, b + p * ldb, ldb * 4);
    if constexpr (NJ > 1) _tile_loadd(7, b + p * ldb + 16, ldb * 4);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NJ > 1) _tile_dpbf16ps(1, 4, 7);
    if constexpr (MI > 1) _tile_dpbf16ps(2, 5, 6);
    if constexpr (MI > 1 && NJ > 1) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, 32 * 4);
  if constexpr (NJ > 1) _tile_stored(1, c + 16, 32 * 4);
  if constexpr (MI > 1) _tile_stored(2, c + 16 * 32, 32 * 4);
  if constexpr (MI > 1 && NJ > 1) _tile_stored(3, c + 16 * 32 + 16, 32 * 4);
}

// CPUID leaf 7: EDX bit 24 AMX-TILE, bit 22 AMX-BF16 (read directly: clang 14's
// __builtin_cpu_supports knows neither name).
bool cpu_has_amx_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (d >> 24 & 1u) && (d >> 22 & 1u);
}

// Whether this process may use the AMX tile registers: Linux hands them out on request
// (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA); asked once, by tile_isa_supported's probe.
bool amx_permitted() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr int kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

__attribute__((target("amx-tile,amx-bf16,avx512f"))) void pairs_amx(const TilePairs& g) {
  const int64_t pp = (g.pairs + 15) / 16 * 16;  // K in whole steps of 16 pairs
  // A in place where its rows are pair words and K fills whole steps, else a zero-padded copy;
  // B in place where K and N fill whole tiles, else a zero-padded copy (+0 products: exact).
  thread_local Scratch<uint32_t> abuf, bbuf, tail;
  const uint32_t* a = g.a;
  int64_t lda = g.a_rs;
  const bool a_direct = g.a_ps == 1 && g.pairs % 16 == 0;
  if (!a_direct) {
    uint32_t* w = abuf.get(size_t(g.M * pp));
    for (int64_t i = 0; i < g.M; ++i) {
      for (int64_t p = 0; p < g.pairs; ++p) w[i * pp + p] = g.a[i * g.a_rs + p * g.a_ps];
      std::fill(w + i * pp + g.pairs, w + (i + 1) * pp, 0u);
    }
    a = w, lda = pp;
  }
  const int64_t np = (g.N + 15) / 16 * 16;
  const uint32_t* b = g.b;
  int64_t ldb = g.ldb;
  if (g.pairs % 16 != 0 || g.N % 16 != 0) {
    uint32_t* w = bbuf.get(size_t(pp * np));
    for (int64_t p = 0; p < pp; ++p) {
      if (p < g.pairs) std::memcpy(w + p * np, g.b + p * g.ldb, size_t(g.N) * 4);
      std::fill(w + p * np + (p < g.pairs ? g.N : 0), w + (p + 1) * np, 0u);
    }
    b = w, ldb = np;
  }
  AmxConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  _tile_loadconfig(&cfg);  // per call: oneDNN's kernels on this thread load their own
  alignas(64) float acc[32 * 32];
  const __m512 alpha = _mm512_set1_ps(g.alpha);
  for (int64_t i0 = 0; i0 < g.M; i0 += 32) {
    const int64_t mr = std::min<int64_t>(32, g.M - i0);
    const uint32_t* ai = a + i0 * lda;
    int64_t ldai = lda;
    if (mr % 16 != 0) {  // a partial tile reads 16 rows: the block's rows in a zero-padded copy
      uint32_t* w = tail.get(size_t(32 * pp));
      std::fill(w, w + 32 * pp, 0u);
      for (int64_t r = 0; r < mr; ++r) std::memcpy(w + r * pp, ai + r * lda, size_t(pp) * 4);
      ai = w, ldai = pp;
    }
    for (int64_t j0 = 0; j0 < g.N; j0 += 32) {
      const int64_t nc = std::min<int64_t>(32, g.N - j0);
      const uint32_t* bj = b + j0;
      if (mr > 16 && nc > 16)
        amx_block<2, 2>(ai, ldai, bj, ldb, pp, acc);
      else if (mr > 16)
        amx_block<2, 1>(ai, ldai, bj, ldb, pp, acc);
      else if (nc > 16)
        amx_block<1, 2>(ai, ldai, bj, ldb, pp, acc);
      else
        amx_block<1, 1>(ai, ldai, bj, ldb, pp, acc);
      const __mmask16 m0 = mask16(nc), m1 = mask16(nc - 16);
      for (int64_t r = 0; r < mr; ++r)
        store_row512(g.c + (i0 + r) * g.ldc + j0, m0, m1, alpha, _mm512_load_ps(acc + r * 32),
                     _mm512_load_ps(acc + r * 32 + 16), g.accumulate);
    }
  }
  _tile_release();
}

float pair_high(uint32_t w) {
  const uint32_t u = w & 0xffff0000u;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
float pair_low(uint32_t w) {
  return pair_high(w << 16);
}

void pairs_scalar(const TilePairs& g) {
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t j = 0; j < g.N; ++j) {
      float acc = 0;
      for (int64_t p = 0; p < g.pairs; ++p) {
        const uint32_t wa = g.a[i * g.a_rs + p * g.a_ps], wb = g.b[p * g.ldb + j];
        acc = std::fma(pair_high(wa), pair_high(wb), acc);
        acc = std::fma(pair_low(wa), pair_low(wb), acc);
      }
      float* cij = g.c + i * g.ldc + j;
      *cij = std::fma(g.alpha, acc, g.accumulate ? *cij : 0.0f);
    }
}

// The pair word of (x, y): x's bf16 bits (core/float16.h) in the high half, y's in the low.
uint32_t pair_word(float x, float y) {
  return uint32_t(bf16_bits(x)) << 16 | bf16_bits(y);
}

// ---------------------------------------------------------------- AVX2: MR x 16
constexpr int kMr256 = 6;

__attribute__((target("avx2,fma"))) __m256i mask8(int64_t n) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int nn = n <= 0 ? 0 : n >= 8 ? 8 : int(n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(nn), lanes);
}

// One MR x 16 block of C, shaped like block512 (operand fields in locals, an unmasked path for
// full blocks, A by rows or by columns). Hot tile products, 1 thread, the attention's shapes (this
// Xeon with RELPOS_TILE_GEMM=avx2): 72-77 -> 99-108 GFLOP/s.
template <int MR, AMode Mode, bool Full>
__attribute__((target("avx2,fma"))) void block256(const TileGemm& g, int64_t i0, int64_t j0, int64_t n) {
  const __m256i m0 = mask8(n), m1 = mask8(n - 8);
  __m256 acc0[MR], acc1[MR];
  RELPOS_UNROLL for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  const int64_t a_rs = g.a_rs, a_cs = g.a_cs, ldb = g.ldb, K = g.K;
  const float* bk = g.b + j0;
  auto load_b = [&](const float* p, __m256& b0, __m256& b1) RELPOS_LAMBDA_ISA("avx2,fma") {
    if constexpr (Full) {
      b0 = _mm256_loadu_ps(p), b1 = _mm256_loadu_ps(p + 8);
    } else {
      b0 = _mm256_maskload_ps(p, m0), b1 = _mm256_maskload_ps(p + 8, m1);
    }
  };
  auto step = [&](const __m256 b0, const __m256 b1, auto a_of) RELPOS_LAMBDA_ISA("avx2,fma") {
    RELPOS_UNROLL for (int r = 0; r < MR; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a_of(r));
      acc0[r] = _mm256_fmadd_ps(ar, b0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(ar, b1, acc1[r]);
    }
  };
  if constexpr (Mode == AMode::Cols) {
    const float* ak = g.a + i0;
    for (int64_t k = 0; k < K; ++k, bk += ldb, ak += a_cs) {
      __m256 b0, b1;
      load_b(bk, b0, b1);
      step(b0, b1, [&](int r) { return ak + r; });
    }
  } else {
    const float* ar[MR];
    RELPOS_UNROLL for (int r = 0; r < MR; ++r) ar[r] = g.a + (i0 + r) * a_rs;
    for (int64_t k = 0; k < K; ++k, bk += ldb) {
      __m256 b0, b1;
      load_b(bk, b0, b1);
      step(b0, b1, [&](int r) { return ar[r] + k; });
    }
  }
  const __m256 alpha = _mm256_set1_ps(g.alpha);
  float* cr = g.c + i0 * g.ldc + j0;
  const int64_t ldc = g.ldc;
  const bool accumulate = g.accumulate;
  RELPOS_UNROLL for (int r = 0; r < MR; ++r, cr += ldc) {
    if constexpr (Full) {
      const __m256 c0 = accumulate ? _mm256_loadu_ps(cr) : _mm256_setzero_ps();
      const __m256 c1 = accumulate ? _mm256_loadu_ps(cr + 8) : _mm256_setzero_ps();
      _mm256_storeu_ps(cr, _mm256_fmadd_ps(alpha, acc0[r], c0));
      _mm256_storeu_ps(cr + 8, _mm256_fmadd_ps(alpha, acc1[r], c1));
    } else {
      const __m256 c0 = accumulate ? _mm256_maskload_ps(cr, m0) : _mm256_setzero_ps();
      const __m256 c1 = accumulate ? _mm256_maskload_ps(cr + 8, m1) : _mm256_setzero_ps();
      _mm256_maskstore_ps(cr, m0, _mm256_fmadd_ps(alpha, acc0[r], c0));
      _mm256_maskstore_ps(cr + 8, m1, _mm256_fmadd_ps(alpha, acc1[r], c1));
    }
  }
}

template <int MR, AMode Mode>
void rows256(const TileGemm& g, int64_t i0, int64_t rows, int64_t j0, int64_t n) {
  if constexpr (MR > 0) {
    if (rows == MR) {
      if (n >= 16) return block256<MR, Mode, true>(g, i0, j0, n);
      return block256<MR, Mode, false>(g, i0, j0, n);
    }
    rows256<MR - 1, Mode>(g, i0, rows, j0, n);
  }
}

// Blocks of 16 columns; in each, the M rows in row_blocks of at most kMr256.
template <AMode Mode>
void walk256(const TileGemm& g) {
  for (int64_t j0 = 0; j0 < g.N; j0 += 16)
    row_blocks(g.M, kMr256, [&](int64_t i0, int64_t rows) { rows256<kMr256, Mode>(g, i0, rows, j0, g.N - j0); });
}

void tile_avx2(const TileGemm& g) {
  if (g.a_cs == 1) return walk256<AMode::Rows>(g);
  walk256<AMode::Cols>(g);
}

// ---------------------------------------------------------------- OpenBLAS
void tile_openblas(const TileGemm& g) {
  const BlasOperand a = blas_operand(g.M, g.K, g.a_rs, g.a_cs);
  cblas_sgemm(CblasRowMajor, a.trans ? CblasTrans : CblasNoTrans, CblasNoTrans, int(g.M), int(g.N), int(g.K), g.alpha,
              g.a, int(a.ld), g.b, int(std::max<int64_t>({g.ldb, g.N, 1})), g.accumulate ? 1.0f : 0.0f, g.c,
              int(std::max<int64_t>({g.ldc, g.N, 1})));
}

}  // namespace

// AMX where the CPU has it (the attention's bf16 products 5-12x faster than on vdpbf16ps, a
// T = 2048 bf16 step 23% faster; bench/RESULTS.md). The pair kernels where they are faster: on
// AMD Zen 4 the bf16 attention ran 13-27% faster on them than on the float32 tiles (T = 2048,
// 1 thread), on a 2-core Intel Xeon 8-16% slower (its vdpbf16ps does the work of two FMAs at
// best, and the packing is extra). The bits are the same either way (header), subnormals aside.
TileIsa default_tile_isa(const TileCpu& cpu) {
  if (cpu.amx_bf16) return TileIsa::AmxBf16;
  if (cpu.avx512_bf16 && !cpu.intel) return TileIsa::Avx512Bf16;
  if (cpu.avx512) return TileIsa::Avx512;
  if (cpu.avx2) return TileIsa::Avx2;
  return TileIsa::OpenBLAS;
}

namespace {

TileIsa best_isa() {
  return default_tile_isa({tile_isa_supported(TileIsa::AmxBf16), tile_isa_supported(TileIsa::Avx512Bf16),
                           tile_isa_supported(TileIsa::Avx512), tile_isa_supported(TileIsa::Avx2),
                           bool(__builtin_cpu_is("intel"))});
}

std::atomic<int64_t> g_probes{0};  // tile_isa_probes()

// Whether the CPU runs isa, asked anew. The CPU's vector tier as kernels/cpu/blas_core.cpp reads
// it: 3 = AVX-512 (F, BW, VL, DQ; every such CPU has FMA), 2 = AVX2 + FMA.
bool probe_tile_isa(TileIsa isa) {
  g_probes.fetch_add(1, std::memory_order_relaxed);
  switch (isa) {
    case TileIsa::Avx512Bf16:
      return ensure_blas_core().cpu_tier >= 3 && cpu_converts_bf16();
    case TileIsa::AmxBf16:
      return ensure_blas_core().cpu_tier >= 3 && cpu_converts_bf16() && cpu_has_amx_bf16() && amx_permitted();
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

}  // namespace

bool tile_isa_supported(TileIsa isa) {
  // Probed once: every tile product asks, and CPUID is a VM exit under a hypervisor (12.6 us a
  // __get_cpuid_count on a KVM Xeon; asked per product it was 44% of a T = 2048 step there).
  static const auto supported = [] {
    std::array<bool, kTileIsaCount> s{};
    for (int i = 0; i < kTileIsaCount; ++i) s[size_t(i)] = probe_tile_isa(TileIsa(i));
    return s;
  }();
  const int i = int(isa);
  return i >= 0 && i < kTileIsaCount && supported[size_t(i)];
}

int64_t tile_isa_probes() {
  return g_probes.load(std::memory_order_relaxed);
}

const char* tile_isa_name(TileIsa isa) {
  switch (isa) {
    case TileIsa::Avx512Bf16:
      return "avx512bf16";
    case TileIsa::AmxBf16:
      return "amxbf16";
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

namespace {
std::atomic<int> g_forced_isa{-1};  // set_tile_isa's choice, -1: none
}  // namespace

void set_tile_isa(std::optional<TileIsa> isa) {
  if (isa) RELPOS_CHECK(tile_isa_supported(*isa), "set_tile_isa: this CPU does not run {}", tile_isa_name(*isa));
  g_forced_isa.store(isa ? int(*isa) : -1);
}

TileIsa tile_isa() {
  if (const int forced = g_forced_isa.load(std::memory_order_relaxed); forced >= 0) return TileIsa(forced);
  static const TileIsa isa = [] {
    const std::string e = env_value("RELPOS_TILE_GEMM");  // one of the names (core/env.cpp)
    if (e.empty()) return best_isa();
    constexpr TileIsa kForcible[] = {TileIsa::AmxBf16, TileIsa::Avx512Bf16, TileIsa::Avx512, TileIsa::Avx2,
                                     TileIsa::OpenBLAS};
    std::string expected;  // 'a', 'b', ... or 'z'
    for (TileIsa t : kForcible) {
      if (e == tile_isa_name(t)) {
        RELPOS_CHECK_CONFIG(tile_isa_supported(t), "environment RELPOS_TILE_GEMM={}: this CPU does not run {} instructions",
                            e, e);
        return t;
      }
      expected += (expected.empty()         ? "'"
                   : t == TileIsa::OpenBLAS ? " or '"
                                            : ", '") +
                  std::string(tile_isa_name(t)) + "'";
    }
    ::relpos::fail_config("environment RELPOS_TILE_GEMM={}: expected {}", echo_value(e), expected);
  }();
  return isa;
}

void tile_gemm(TileIsa isa, const TileGemm& g) {
  if (g.M <= 0 || g.N <= 0) return;
  RELPOS_CHECK(g.a_cs == 1 || g.a_rs == 1,
               "tile_gemm: A's strides ({}, {}) must have one of them 1 (A or A^T of a row-major matrix)", g.a_rs,
               g.a_cs);
  RELPOS_CHECK(tile_isa_supported(isa), "tile_gemm: this CPU does not run {} instructions", tile_isa_name(isa));
  switch (isa) {
    case TileIsa::AmxBf16:  // float32 operands: the avx512 kernels
    case TileIsa::Avx512Bf16:
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

void tile_gemm_pairs(TileIsa isa, const TilePairs& g) {
  if (g.M <= 0 || g.N <= 0) return;
  if (isa == TileIsa::Scalar) return pairs_scalar(g);
  RELPOS_CHECK((isa == TileIsa::Avx512Bf16 || isa == TileIsa::AmxBf16) && tile_isa_supported(isa),
               "tile_gemm_pairs: needs avx512bf16 or amxbf16 instructions (asked: {}{})", tile_isa_name(isa),
               tile_isa_supported(isa) ? "" : ", which this CPU lacks");
  if (isa == TileIsa::AmxBf16) return pairs_amx(g);
  pairs_avx512(g);
}

const uint32_t* pack_pairs_rows(const float* x, int64_t ld, int64_t rows, int64_t cols, Scratch<uint32_t>& out) {
  const int64_t np = (cols + 1) / 2;
  uint32_t* words = out.get(size_t(rows * np));
  const bool native = cpu_converts_bf16();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ld;
    uint32_t* o = words + r * np;
    if (native) {
      bf16_pair_words_native(xr, cols, o);
    } else {
      for (int64_t p = 0; p < cols / 2; ++p) o[p] = pair_word(xr[2 * p], xr[2 * p + 1]);
      if (cols % 2) o[np - 1] = pair_word(xr[cols - 1], 0.0f);
    }
  }
  return words;
}

const uint32_t* pack_row_pairs(const float* x, int64_t ld, int64_t rows, int64_t cols, Scratch<uint32_t>& out) {
  const int64_t np = (rows + 1) / 2;
  uint32_t* words = out.get(size_t(np * cols));
  const bool native = cpu_converts_bf16();
  for (int64_t p = 0; p < np; ++p) {
    const float* hi = x + 2 * p * ld;
    const float* lo = 2 * p + 1 < rows ? hi + ld : nullptr;
    uint32_t* o = words + p * cols;
    if (native)
      bf16_row_pair_words_native(hi, lo, cols, o);
    else
      for (int64_t j = 0; j < cols; ++j) o[j] = pair_word(hi[j], lo ? lo[j] : 0.0f);
  }
  return words;
}

const uint32_t* pack_pairs_cols(const float* x, int64_t ld, int64_t rows, int64_t cols, Scratch<uint32_t>& out) {
  RELPOS_CHECK(cols % 2 == 0, "pack_pairs_cols: {} columns, expected an even count", cols);
  const int64_t np = cols / 2;
  uint32_t* words = out.get(size_t(rows * np));
  if (cpu_converts_bf16()) {  // 16 x 16 blocks of words transposed in registers
    bf16_pair_words_transposed_native(x, ld, rows, cols, words, rows);
    return words;
  }
  constexpr int64_t kR = 16;  // 16 rows at a time: runs of 16 contiguous writes per pair
  for (int64_t r0 = 0; r0 < rows; r0 += kR) {
    const int64_t nr = std::min(kR, rows - r0);
    for (int64_t p = 0; p < np; ++p) {
      uint32_t* o = words + p * rows + r0;
      const float* xp = x + r0 * ld + 2 * p;
      for (int64_t rr = 0; rr < nr; ++rr) o[rr] = pair_word(xp[rr * ld], xp[rr * ld + 1]);
    }
  }
  return words;
}

}  // namespace relpos::k::cpu

namespace relpos::k {

std::string cpu_attention_tile_path() {
  constexpr const char* kBf16Products =
      "avx512 micro-kernels (12 x 32 blocks); bf16 products (autocast's Q K^T, dO V^T, P V, dS K, dS^T Q, P^T dO) "
      "on ";
  const cpu::TileIsa isa = cpu::tile_isa();
  const std::string how = env_value("RELPOS_TILE_GEMM").empty() ? "" : " [RELPOS_TILE_GEMM]";
  switch (isa) {
    case cpu::TileIsa::AmxBf16:
      return std::string(kBf16Products) + "AMX tiles (tdpbf16ps)" + how;
    case cpu::TileIsa::Avx512Bf16:
      return std::string(kBf16Products) + "avx512bf16 (vdpbf16ps)" + how;
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
