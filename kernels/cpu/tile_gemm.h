// kernels/cpu/tile_gemm.h — the fused attention's per-tile products (kernels/cpu/attention.cpp)
// on register-blocked micro-kernels (kernels/cpu/tile_gemm.cpp).
//
// The tiles are small (M <= 256 rows, K = head_dim or <= 256 keys, N = head_dim or <= 256 keys)
// and there are thousands of them per step: a library GEMM spends much of such a call packing
// its operands and choosing kernels. These kernels read the operands in place:
//
//   C[M, N] = alpha A B          (accumulate = false)
//   C[M, N] = C + alpha A B      (accumulate = true)
//   A(i, k) = a[i a_rs + k a_cs]  (any strides: A or A^T of a row-major matrix)
//   B(k, j) = b[k ldb + j]        (rows contiguous; a B^T operand is packed first)
//   C(i, j) = c[i ldc + j]
//
// Each output element is one float32 sequence, acc = fma(A(i, k), B(k, j), acc) over
// k = 0, 1, ..., K-1 from acc = 0, then C = fma(alpha, acc, C or 0): the same bits on every ISA
// below and in the scalar reference (tests/kernels/test_tile_gemm.cpp holds them to that), and
// one thread per call, so the fused attention stays deterministic at any thread count.
//
// ISAs, chosen once at run time by what the CPU runs (RELPOS_TILE_GEMM=avx512|avx2|openblas
// forces one; an ISA the CPU lacks is a named error):
//   avx512:   12 x 32 blocks (24 zmm accumulators), masked loads/stores at the edges;
//   avx2:     6 x 16 blocks (12 ymm accumulators);
//   openblas: cblas_sgemm on each tile (what every CPU without AVX2 + FMA runs).
#pragma once
#include <algorithm>
#include <cstdint>

namespace relpos::k::cpu {

enum class TileIsa { OpenBLAS, Avx2, Avx512, Scalar };

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

// On the ISA chosen for this process.
void tile_gemm(const TileGemm& g);
// On a given ISA (tests, benchmarks); fails with a named error if this CPU cannot run it.
// Scalar is the reference: plain loops with std::fma, slow.
void tile_gemm(TileIsa isa, const TileGemm& g);
TileIsa tile_isa();                    // the ISA tile_gemm(g) uses
bool tile_isa_supported(TileIsa isa);  // whether this CPU runs it
const char* tile_isa_name(TileIsa isa);

}  // namespace relpos::k::cpu
