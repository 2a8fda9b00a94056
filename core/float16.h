// core/float16.h — rounding a float to the values bfloat16 and IEEE float16 can hold, kept in a
// float (mixed-precision emulation: train.precision bf16 | fp16 rounds where a 16-bit tensor
// would be stored; arithmetic stays float32). Round to nearest, ties to even, as the hardware
// conversions and PyTorch (c10/util/BFloat16.h, Half.h) do; NaN stays NaN. float16 overflows
// to ±inf from 65520 (half-way to the next binade) and keeps its subnormals (2^-24 steps).
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace relpos {

inline float round_to_bf16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return x;  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);                // ties to even; a carry may round up to inf
  return std::bit_cast<float>(u & 0xffff0000u);
}

// The 16 bits of round_to_bf16(x), a NaN kept quiet (its payload may be in the low half that is
// dropped): what a bf16 operand holds (kernels/cpu/gemm.cpp packing, the attention's pair words).
inline uint16_t bf16_bits(float x) {
  const auto hi = uint16_t(std::bit_cast<uint32_t>(round_to_bf16(x)) >> 16);
  return std::isnan(x) ? uint16_t(hi | 0x40u) : hi;
}

inline float round_to_fp16(float x) {
  const float a = std::fabs(x);
  if (std::isnan(x)) return x;
  if (!(a < 65520.0f)) return std::copysign(std::numeric_limits<float>::infinity(), x);
  if (a < 6.103515625e-05f)  // below float16's smallest normal (2^-14): multiples of 2^-24
    return std::nearbyint(x * 16777216.0f) / 16777216.0f;  // the scaling is exact; nearbyint ties to even
  uint32_t u = std::bit_cast<uint32_t>(x);
  u += 0x0fffu + ((u >> 13) & 1u);  // keep 10 of the 23 fraction bits
  return std::bit_cast<float>(u & 0xffffe000u);
}

// The rows x cols block at src (row stride src_ld) rounded to bfloat16 (bf16) or float16 values,
// written to dst (row stride dst_ld); dst == src rounds in place. The one row-rounding loop of
// the kernels that round their own outputs and operands (kernels/cpu/gemm.cpp, attention.cpp).
inline void round_block(bool bf16, const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
                        int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * src_ld;
    float* d = dst + r * dst_ld;
    if (bf16)
      for (int64_t j = 0; j < cols; ++j) d[j] = round_to_bf16(s[j]);
    else
      for (int64_t j = 0; j < cols; ++j) d[j] = round_to_fp16(s[j]);
  }
}

}  // namespace relpos
