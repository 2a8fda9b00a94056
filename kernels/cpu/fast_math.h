// kernels/cpu/fast_math.h — a float32 exp that the compiler can vectorise (std::expf is a
// scalar libm call). Cephes' expf scheme: n = round(x log2 e), r = x - n ln2 (ln2 split in
// two parts), exp(r) by a degree-6 polynomial, times 2^n built in the exponent bits.
// Relative error within 3e-7 of std::exp on [-87.3, 88.7] (tested); below -87.3 (and for
// -inf, i.e. masked logits) it returns exactly 0.
#pragma once
#include <bit>
#include <cstdint>

namespace relpos::k::fast {

inline float exp_f32(float x) {
  const bool underflow = x < -87.3f;
  x = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
  const float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>(static_cast<int32_t>(n + 127.0f) << 23);
  return underflow ? 0.0f : y * scale;
}

}  // namespace relpos::k::fast
