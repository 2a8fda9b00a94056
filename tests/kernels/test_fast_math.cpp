// The vectorisable float32 exp (softmax, attention), GELU (erf form) and tanh, against libm in float64.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

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

// gelu_erf_run (the GELU of k::unary and of the GEMM's epilogue: 16 lanes in AVX-512 where the CPU
// has it) and the scalar pair gelu_erf_and_grad_f32 (the epilogue's form without AVX-512) give the
// scalar functions' bits: a sweep, the special values, random bit patterns (the
// whole float range; NaN compared as NaN), in place and into separate outputs, each output alone,
// lengths that end in a masked tail, and nothing written past n.
TEST_CASE(
    "fast gelu_erf_run and gelu_erf_and_grad_f32 give gelu_erf_f32's and gelu_erf_grad_f32's bits, in place, any "
    "length",
    "[kernels]") {
  std::vector<float> x;
  for (double v = -20.0; v <= 20.0; v += 0.000613) x.push_back(float(v));
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-45f, -1e-45f, -16.0f, 16.0f, -13.2f, -13.21f, -13.3f, -200.0f, inf,
                  -inf, std::numeric_limits<float>::quiet_NaN(), 3.4e38f, -3.4e38f})
    x.push_back(v);
  uint32_t state = 12345;
  for (int i = 0; i < (1 << 20); ++i) {
    state = state * 1664525u + 1013904223u;
    x.push_back(std::bit_cast<float>(state));
  }
  const auto same = [](float a, float b) {
    return (std::isnan(a) && std::isnan(b)) || std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
  };
  for (const size_t n : {x.size(), size_t(1), size_t(15), size_t(16), size_t(17), size_t(100)}) {
    const float guard = 1234.5f;
    std::vector<float> y(n + 1, guard), dy(n + 1, guard), y_only(n + 1, guard), dy_only(n + 1, guard);
    std::vector<float> in_place(x.begin(), x.begin() + std::ptrdiff_t(n));
    relpos::k::fast::gelu_erf_run(x.data(), y.data(), dy.data(), int64_t(n));
    relpos::k::fast::gelu_erf_run(x.data(), y_only.data(), nullptr, int64_t(n));
    relpos::k::fast::gelu_erf_run(x.data(), nullptr, dy_only.data(), int64_t(n));
    relpos::k::fast::gelu_erf_run(in_place.data(), in_place.data(), nullptr, int64_t(n));
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const float want = relpos::k::fast::gelu_erf_f32(x[i]), want_g = relpos::k::fast::gelu_erf_grad_f32(x[i]);
      // the scalar pair from one evaluation (the epilogue's form on CPUs without AVX-512) too
      float pair_y = 0, pair_dy = 0;
      relpos::k::fast::gelu_erf_and_grad_f32(x[i], pair_y, pair_dy);
      if (!same(pair_y, want) || !same(pair_dy, want_g)) {
        if (++bad <= 5) UNSCOPED_INFO("x = " << x[i] << ": gelu_erf_and_grad_f32 " << pair_y << ", " << pair_dy);
      }
      if (!same(y[i], want) || !same(y_only[i], want) || !same(in_place[i], want) || !same(dy[i], want_g) ||
          !same(dy_only[i], want_g)) {
        if (++bad <= 5)
          UNSCOPED_INFO("x = " << x[i] << ": gelu " << y[i] << " vs " << want << ", gelu' " << dy[i] << " vs "
                               << want_g);
      }
    }
    INFO("n = " << n);
    CHECK(bad == 0);
    CHECK((y[n] == guard && dy[n] == guard && y_only[n] == guard && dy_only[n] == guard));
  }
}

// No subnormal result from the GELU pair (scalar or 16 lanes): a subnormal intermediate costs
// microcode assists (x = -13.1 ran 25x slower per value, N(0, 10^2) inputs 2.2x) — exp(-x^2 / 2)
// is flushed from x^2 > kGaussFlush on, where 2 Phi is 2 for x > 0 (gelu = x, gelu' = 1) and
// gelu, gelu' are 0 for x < 0; below it every value stays normal.
TEST_CASE("fast gelu: no subnormal value or derivative at any input, the tails exact past the flush", "[kernels]") {
  std::vector<float> x;
  for (double v = -17.0; v <= 17.0; v += 0.0003) x.push_back(float(v));
  std::vector<float> y(x.size()), dy(x.size());
  relpos::k::fast::gelu_erf_run(x.data(), y.data(), dy.data(), int64_t(x.size()));
  const auto subnormal = [](float v) { return v != 0.0f && std::abs(v) < std::numeric_limits<float>::min(); };
  size_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float sy = relpos::k::fast::gelu_erf_f32(x[i]), sd = relpos::k::fast::gelu_erf_grad_f32(x[i]);
    if (subnormal(y[i]) || subnormal(dy[i]) || subnormal(sy) || subnormal(sd)) {
      if (++bad <= 5) UNSCOPED_INFO("x = " << x[i] << ": gelu " << y[i] << ", gelu' " << dy[i]);
    }
  }
  CHECK(bad == 0);
  for (float v : {12.7f, 13.1f, 13.2f, 14.0f}) {
    INFO("x = +-" << v);
    CHECK(relpos::k::fast::gelu_erf_f32(v) == v);
    CHECK(relpos::k::fast::gelu_erf_grad_f32(v) == 1.0f);
    CHECK(relpos::k::fast::gelu_erf_f32(-v) == 0.0f);
    CHECK(relpos::k::fast::gelu_erf_grad_f32(-v) == 0.0f);
  }
  // below the flush the negative tail is still resolved (not cut off early)
  CHECK(relpos::k::fast::gelu_erf_f32(-12.6f) < 0.0f);
  CHECK(relpos::k::fast::gelu_erf_grad_f32(-12.6f) < 0.0f);
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
