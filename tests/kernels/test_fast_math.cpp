// The vectorisable float32 exp (softmax, attention), GELU (erf form) and tanh, against libm in float64.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "kernels/cpu/fast_math.h"

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

// The float32 GELU (erf form) and its derivative without libm's erff, against float64 libm.
// gelu: relative error where |gelu(x)| > 1e-4, absolute below (the negative tail, where the
// error of exp(-x^2/2 + ...) grows like x^2 eps relative to a value near 0); gelu': absolute.
TEST_CASE("fast gelu_erf_f32 and its derivative are within 1e-6 of the float64 formulas", "[kernels]") {
  double worst_rel = 0, worst_tail = 0, worst_grad = 0;
  for (double x = -12.0; x <= 12.0; x += 0.000377) {
    const float xf = float(x);
    const double xd = double(xf);
    // 0.5 x (1 + erf(x / sqrt 2)) written with erfc: no cancellation in the negative tail
    const double want = 0.5 * xd * std::erfc(-xd / std::sqrt(2.0));
    const double got = relpos::k::fast::gelu_erf_f32(xf);
    if (std::abs(want) > 1e-4) worst_rel = std::max(worst_rel, std::abs(got - want) / std::abs(want));
    else worst_tail = std::max(worst_tail, std::abs(got - want));
    const double want_g =
        0.5 * std::erfc(-xd / std::sqrt(2.0)) + xd * std::exp(-0.5 * xd * xd) / std::sqrt(2.0 * std::acos(-1.0));
    worst_grad = std::max(worst_grad, std::abs(double(relpos::k::fast::gelu_erf_grad_f32(xf)) - want_g));
  }
  INFO("worst relative error of gelu " << worst_rel << " (absolute where |gelu| <= 1e-4: " << worst_tail
                                        << "), worst absolute error of gelu' " << worst_grad);
  CHECK(worst_rel < 1e-6);
  CHECK(worst_tail < 1e-10);
  CHECK(worst_grad < 1e-6);
  CHECK(relpos::k::fast::gelu_erf_f32(0.0f) == 0.0f);
  CHECK(std::isnan(relpos::k::fast::gelu_erf_f32(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(relpos::k::fast::gelu_erf_grad_f32(std::numeric_limits<float>::quiet_NaN())));
  CHECK(relpos::k::fast::gelu_erf_f32(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
  CHECK(relpos::k::fast::gelu_erf_f32(-30.0f) == 0.0f);
  CHECK(relpos::k::fast::gelu_erf_grad_f32(30.0f) == 1.0f);
}

TEST_CASE("fast tanh_f32 is within 4e-7 relative of std::tanh, odd, +-1 in the tails, NaN for NaN", "[kernels]") {
  // Both branches (|x| < 0.625: the polynomial; else through exp_f32) and the switch between them,
  // down to values where tanh(x) = x in float32.
  double worst = 0;
  const auto check = [&](float xf) {
    const double want = std::tanh(double(xf)), got = relpos::k::fast::tanh_f32(xf);
    worst = std::max(worst, std::abs(got - want) / std::abs(want));
  };
  for (double x = 1e-6; x <= 20.0; x *= 1.0001) {
    check(float(x));
    check(float(-x));
  }
  for (float x = 0.62f; x <= 0.63f; x = std::nextafter(x, 1.0f)) check(x);
  INFO("worst relative error " << worst);
  CHECK(worst < 4e-7);
  CHECK(relpos::k::fast::tanh_f32(0.0f) == 0.0f);
  CHECK(relpos::k::fast::tanh_f32(1e-30f) == 1e-30f);
  CHECK(relpos::k::fast::tanh_f32(100.0f) == 1.0f);
  CHECK(relpos::k::fast::tanh_f32(-std::numeric_limits<float>::infinity()) == -1.0f);
  CHECK(std::isnan(relpos::k::fast::tanh_f32(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("fast exp_f64 is within 3e-16 relative of std::exp, exact 0 below the range, inf above", "[kernels]") {
  double worst = 0;
  for (double x = -707.0; x <= 709.78; x += 0.0137) {
    const double want = std::exp(x);
    worst = std::max(worst, std::abs(relpos::k::fast::exp_f64(x) - want) / want);
  }
  for (double x = -1.0; x <= 1.0; x += 1.3e-5) {  // cross entropy's range (x <= 0), densely
    const double want = std::exp(x);
    worst = std::max(worst, std::abs(relpos::k::fast::exp_f64(x) - want) / want);
  }
  INFO("worst relative error " << worst);
  REQUIRE(worst < 3e-16);
  REQUIRE(relpos::k::fast::exp_f64(0.0) == 1.0);
  REQUIRE(relpos::k::fast::exp_f64(-std::numeric_limits<double>::infinity()) == 0.0);
  REQUIRE(relpos::k::fast::exp_f64(-800.0) == 0.0);
  REQUIRE(relpos::k::fast::exp_f64(710.0) == std::numeric_limits<double>::infinity());
  REQUIRE(std::isnan(relpos::k::fast::exp_f64(std::numeric_limits<double>::quiet_NaN())));
}
