#include "core/rng.h"

#include <cmath>
#include <numbers>

namespace relpos {

uint64_t Generator::next_u64() { return rng_draw(state_.seed, state_.offset++); }

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
