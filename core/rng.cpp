#include "core/rng.h"

#include <cmath>
#include <numbers>

namespace relpos {

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint64_t Generator::next_u64() {
  uint64_t k = splitmix64(state_.seed ^ 0x5851F42D4C957F2DULL);
  return splitmix64(k + state_.offset++ * 0xD1B54A32D192ED03ULL);
}

double Generator::uniform() { return double(next_u64() >> 11) * 0x1.0p-53; }

double Generator::normal() {
  double u1 = uniform(), u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

Generator& default_generator() {
  static Generator g(0);
  return g;
}

}  // namespace relpos
