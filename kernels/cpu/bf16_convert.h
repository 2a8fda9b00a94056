// kernels/cpu/bf16_convert.h — float32 to bf16 with the CPU's own instruction (vcvtneps2bf16,
// AVX512-BF16): round to nearest even, a NaN stays a quiet NaN, 16 values per instruction. It
// reads subnormal floats as zero (core/float16.h's round_to_bf16 keeps a bf16 subnormal); its
// users feed bf16 units (vdpbf16ps, AMX, oneDNN's bf16 GEMMs) that read subnormal bf16 inputs as
// zero themselves, so their products are the same either way.
#pragma once
#include <cstdint>

namespace relpos::k::cpu {

// Whether this CPU has the instruction (and AVX512 BW/VL for the masked tails); read once.
bool cpu_converts_bf16();
// out[j] = bf16 bits of src[j], j < n. Only where cpu_converts_bf16().
void bf16_row_native(const float* src, int64_t n, uint16_t* out);
// out[p] = (bf16 of src[2p]) << 16 | (bf16 of src[2p + 1]), p < ceil(n / 2) (an odd n's last word
// has a zero low half): the pair words of kernels/cpu/tile_gemm.h. Only where cpu_converts_bf16().
void bf16_pair_words_native(const float* src, int64_t n, uint32_t* out);
// out[j] = (bf16 of hi[j]) << 16 | (bf16 of lo[j]), j < n; lo == nullptr reads zeros: pairs of two
// rows (tile_gemm.h, pack_row_pairs). Only where cpu_converts_bf16().
void bf16_row_pair_words_native(const float* hi, const float* lo, int64_t n, uint32_t* out);
// out[p ldo + r] = (bf16 of x[r, 2p]) << 16 | (bf16 of x[r, 2p + 1]) for r < rows, p < ceil(cols / 2)
// (an odd column count's last word has a zero low half): the pair words of each row, stored by
// column — X^T as the B operand of tile_gemm_pairs (ldb = ldo; the weights W of X W^T, the keys
// of Q K^T), 16 x 16 blocks of words transposed in registers. Only where cpu_converts_bf16().
void bf16_pair_words_transposed_native(const float* x, int64_t ld, int64_t rows, int64_t cols, uint32_t* out,
                                       int64_t ldo);
// out[i ldo + p] = (bf16 of x[2p, i]) << 16 | (bf16 of x[2p + 1, i]) for i < cols, p < ceil(rows / 2)
// (x row-major, leading dim ld; an odd row count's last word has a zero low half): the pairs of
// two rows, stored by column — X^T as the row-major A operand of tile_gemm_pairs (a_rs = ldo,
// a_ps = 1), where pack_row_pairs' words would be read with a stride. 16 x 16 blocks of words
// transposed in registers. col_sums (or nullptr): col_sums[i] = the float64 sum of x[0 .. rows, i],
// the rows added in order from 0 (a weight gradient's bias gradient, from the float32 values, while
// they are in registers). Only where cpu_converts_bf16().
void bf16_col_pair_words_native(const float* x, int64_t ld, int64_t rows, int64_t cols, uint32_t* out, int64_t ldo,
                                double* col_sums = nullptr);

}  // namespace relpos::k::cpu
