// kernels/cpu/tile_gemm.h — the fused attention's per-tile products (kernels/cpu/attention.cpp)
// on register-blocked micro-kernels (kernels/cpu/tile_gemm.cpp).
//
// The tiles are small (M <= 256 rows, K = head_dim or <= 256 keys, N = head_dim or <= 256 keys)
// and there are thousands of them per step: a library GEMM spends much of such a call packing
// its operands and choosing kernels. These kernels read the operands in place:
//
//   C[M, N] = alpha A B          (accumulate = false)
//   C[M, N] = C + alpha A B      (accumulate = true)
//   A(i, k) = a[i a_rs + k a_cs]  (a_cs = 1 or a_rs = 1: A or A^T of a row-major matrix)
//   B(k, j) = b[k ldb + j]        (rows contiguous; a B^T operand is packed first)
//   C(i, j) = c[i ldc + j]
//
// Each output element is one float32 sequence, acc = fma(A(i, k), B(k, j), acc) over
// k = 0, 1, ..., K-1 from acc = 0, then C = fma(alpha, acc, C or 0): the same bits on every ISA
// below (amxbf16's bf16 products aside) and in the scalar reference (tests/kernels/test_tile_gemm.cpp
// holds them to that), and
// one thread per call, so the fused attention stays deterministic at any thread count.
//
// ISAs, chosen once at run time by what the CPU runs (RELPOS_TILE_GEMM=amxbf16|avx512bf16|avx512|avx2|
// openblas forces one; an ISA the CPU lacks is a named error):
//   amxbf16:  avx512's float32 kernels, and those bf16 pair products on AMX tiles (tdpbf16ps,
//             AMX-BF16: Sapphire Rapids and later Xeons); the default where the CPU has it. NOT
//             the fma sequence: each instruction adds a 32-long step's even and odd products apart,
//             then into the accumulator (Intel SDM), so its results are float32 sums in another
//             order (tests hold them within (K + 4) float32 roundings of float64);
//   avx512bf16: avx512's float32 kernels, and the bf16 pair kernels below for the products whose
//             operands are both bf16 values under autocast (AVX512-BF16: Zen 4, Cooper Lake,
//             Sapphire Rapids); the default on such CPUs without AMX except Intel's, where the
//             pairs measured slower than the float32 tiles (tile_gemm.cpp, best_isa);
//   avx512:   12 x 32 blocks (24 zmm accumulators), masked loads/stores at the edges;
//   avx2:     6 x 16 blocks (12 ymm accumulators);
//   openblas: cblas_sgemm on each tile (what every CPU without AVX2 + FMA runs).
//
// bf16 pair products (tile_gemm_pairs): under bf16 autocast every product of the fused attention
// multiplies two bf16-valued operands: S = scale Q K^T (forward and the backward's recompute) and
// dP = dO V^T, and, with the probabilities P and dS rounded to bf16 as FlashAttention does
// (k::AttentionArgs::probs), O += P V, dQ += scale dS K, dK += scale dS^T Q and dV += P^T dO.
// Packed as pairs along K (pack_pairs_rows / pack_pairs_cols / pack_row_pairs: one 32-bit word
// holds elements 2p and 2p + 1), vdpbf16ps does two steps of the float32 sequence per instruction: it adds the word's
// high product, then its low one, each product exact (bf16 x bf16 fits a float32) and each sum
// rounded once, as an fma would. Element 2p is packed in the high half, so the result is the
// scalar reference's sequence on the same values, bit for bit (tests/kernels/test_tile_gemm.cpp),
// with one documented difference: the instruction reads subnormal inputs as zero and flushes
// subnormal partial sums to zero (|x| < 2^-126; with every input of magnitude >= 2^-56 or zero, no
// nonzero partial sum can be that small).
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>

#include "kernels/cpu/scratch.h"

namespace relpos::k::cpu {

enum class TileIsa { OpenBLAS, Avx2, Avx512, Avx512Bf16, AmxBf16, Scalar };
inline constexpr int kTileIsaCount = int(TileIsa::Scalar) + 1;

struct TileGemm {
  int64_t M = 0, N = 0, K = 0;
  float alpha = 1;
  const float* a = nullptr;
  int64_t a_rs = 0, a_cs = 1;
  const float* b = nullptr;
  int64_t ldb = 0;
  bool accumulate = false;
  float* c = nullptr;
  int64_t ldc = 0;
};

// How BLAS reads A(i, k) = a[i a_rs + k a_cs] of an [M, K] operand: row-major, transposed or
// not, with a leading dim it accepts (>= K untransposed, >= M transposed). With one row or one
// inner index both strides can be 1 (a one-key attention tile), and only one reading is valid.
struct BlasOperand {
  bool trans;
  int64_t ld;
};
inline BlasOperand blas_operand(int64_t M, int64_t K, int64_t a_rs, int64_t a_cs) {
  if (a_cs == 1 && (a_rs >= K || M <= 1)) return {false, std::max<int64_t>({a_rs, K, 1})};
  return {true, std::max<int64_t>({a_cs, M, 1})};
}

// C[M, N] = (C +) alpha A B on bf16 pairs: A(i, 2p), A(i, 2p + 1) in word a[i a_rs + p a_ps]
// (high, low half), B(2p, j), B(2p + 1, j) in word b[p ldb + j]; K = 2 * (number of pairs) (an odd
// K is padded with a zero pair half on both sides, which adds exactly +0 to each sum).
struct TilePairs {
  int64_t M = 0, N = 0, pairs = 0;
  float alpha = 1;
  const uint32_t* a = nullptr;
  int64_t a_rs = 0;
  const uint32_t* b = nullptr;
  int64_t ldb = 0;
  float* c = nullptr;
  int64_t ldc = 0;
  int64_t a_ps = 1;         // A's pair stride: 1 for pack_pairs_rows' words, the row length for
                            // A^T read from pack_row_pairs' words
  bool accumulate = false;  // C = fma(alpha, acc, C) instead of fma(alpha, acc, 0)
};

// The rows x cols block at x (row stride ld), each value rounded to bf16 (nearest even; exact for
// bf16 values; with the CPU's own conversion where it has one, which makes subnormals zero as
// vdpbf16ps reads them anyway, kernels/cpu/bf16_convert.h), as pair words in out's memory
// (returned): out[r np + p] = (x[r, 2p], x[r, 2p + 1]), np = ceil(cols / 2), an odd row's last
// word (x[r, cols - 1], 0) — the A operand of tile_gemm_pairs with a_rs = np, a_ps = 1.
const uint32_t* pack_pairs_rows(const float* x, int64_t ld, int64_t rows, int64_t cols, Scratch<uint32_t>& out);
// Pairs of consecutive rows: out[p cols + j] = (x[2p, j], x[2p + 1, j]), p < ceil(rows / 2), the
// last pair (x[rows - 1, j], 0) when rows is odd — the B operand of tile_gemm_pairs (ldb = cols)
// whose K runs down x's rows (the values, keys, queries or dO of a tile), or, read transposed
// (a_rs = 1, a_ps = cols), the A operand X^T.
const uint32_t* pack_row_pairs(const float* x, int64_t ld, int64_t rows, int64_t cols, Scratch<uint32_t>& out);
// The same block transposed: out[p rows + r] = (x[r, 2p], x[r, 2p + 1]) — the B operand X^T with
// ldb = rows (the keys K^T or values V^T of one head).
const uint32_t* pack_pairs_cols(const float* x, int64_t ld, int64_t rows, int64_t cols, Scratch<uint32_t>& out);

// On the ISA chosen for this process.
void tile_gemm(const TileGemm& g);
// On a given ISA (tests, benchmarks); fails with a named error if this CPU cannot run it.
// Scalar is the reference: plain loops with std::fma, slow.
void tile_gemm(TileIsa isa, const TileGemm& g);
// What the CPU runs, and the ISA a process picks from it (tile_isa() without RELPOS_TILE_GEMM).
struct TileCpu {
  bool amx_bf16 = false, avx512_bf16 = false, avx512 = false, avx2 = false, intel = false;
};
TileIsa default_tile_isa(const TileCpu& cpu);
TileIsa tile_isa();                    // the ISA tile_gemm(g) uses
// Tests: run this ISA from now on instead of the process's choice (a named error if this CPU
// cannot run it); std::nullopt goes back to the process's choice.
void set_tile_isa(std::optional<TileIsa> isa);
bool tile_isa_supported(TileIsa isa);  // whether this CPU runs it (the CPU is asked once per process)
int64_t tile_isa_probes();             // tests: how often the CPU was asked so far
const char* tile_isa_name(TileIsa isa);
// Whether the process's ISA multiplies bf16 pairs (avx512bf16 or amxbf16).
inline bool tile_pairs_enabled() {
  const TileIsa isa = tile_isa();
  return isa == TileIsa::Avx512Bf16 || isa == TileIsa::AmxBf16;
}
// The pair product on AVX512-BF16 or AMX-BF16 (fails with a named error on a CPU without the
// one asked for), or on the scalar reference (ISA Scalar: the words unpacked, plain loops with
// std::fma).
void tile_gemm_pairs(TileIsa isa, const TilePairs& g);

}  // namespace relpos::k::cpu
