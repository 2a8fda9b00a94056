// The vectorisable float32 exp used by softmax, against std::exp.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "relpos/kernels/cpu/fast_math.h"

TEST_CASE("fast exp_f32 is within 3e-7 relative of std::exp, exact 0 below the range", "[kernels]") {
  double worst = 0;
  for (double x = -87.0; x <= 88.0; x += 0.000731) {
    float xf = float(x);
    double want = std::exp(double(xf));
    double got = relpos::k::fast::exp_f32(xf);
    worst = std::max(worst, std::abs(got - want) / want);
  }
  INFO("worst relative error " << worst);
  REQUIRE(worst < 3e-7);
  REQUIRE(relpos::k::fast::exp_f32(0.0f) == 1.0f);
  REQUIRE(relpos::k::fast::exp_f32(-std::numeric_limits<float>::infinity()) == 0.0f);
  REQUIRE(relpos::k::fast::exp_f32(-100.0f) == 0.0f);
}
