// Small layers: Dropout module semantics, norms and MLP shapes.
#include <catch2/catch.hpp>

#include "../helpers.h"
#include "nn/layers.h"

using namespace relpos;

TEST_CASE("layers: Dropout zeroes about p of the inputs in training and is the identity in eval", "[nn]") {
  nn::Dropout d(0.25);
  Variable x(Tensor::ones({4000}, DType::F64));
  Generator g(1);
  auto y = d.forward(x, &g).data().to_vector<double>();
  int zeros = 0;
  for (double v : y) {
    if (v == 0.0) ++zeros;
    else REQUIRE(v == Approx(1.0 / 0.75));
  }
  REQUIRE(zeros == Approx(1000).margin(100));  // binomial sd ~27
  d.eval();
  REQUIRE(d.forward(x, &g).data().to_vector<double>() == x.data().to_vector<double>());
  REQUIRE_THROWS_WITH(nn::Dropout(1.0), Catch::Contains("[0, 1)"));
}

TEST_CASE("layers: LayerNorm, RMSNorm and MLP keep the shape and register named parameters", "[nn]") {
  Generator g(2);
  nn::LayerNorm ln(8, 1e-5, DType::F64);
  nn::RMSNorm rms(8, 1e-6, DType::F64);
  nn::MLP mlp(8, 16, 0.0, g, DType::F64);
  Variable x = test::rand_var({2, 3, 8}, 4);
  REQUIRE(ln.forward(x).shape() == Shape{2, 3, 8});
  REQUIRE(rms.forward(x).shape() == Shape{2, 3, 8});
  REQUIRE(mlp.forward(x, nullptr).shape() == Shape{2, 3, 8});
  REQUIRE(mlp.named_parameters().size() == 4);
  REQUIRE(mlp.named_parameters()[0].first == "fc1.weight");
  // LayerNorm output has zero mean and variance var/(var + eps) per row (weight 1, bias 0)
  auto xs = x.data().to_vector<double>();
  auto y = ln.forward(x).data().to_vector<double>();
  double xm = 0, xv = 0, m = 0, v = 0;
  for (int i = 0; i < 8; ++i) xm += xs[size_t(i)] / 8, m += y[size_t(i)] / 8;
  for (int i = 0; i < 8; ++i) xv += (xs[size_t(i)] - xm) * (xs[size_t(i)] - xm) / 8, v += (y[size_t(i)] - m) * (y[size_t(i)] - m) / 8;
  REQUIRE(m == Approx(0).margin(1e-12));
  REQUIRE(v == Approx(xv / (xv + 1e-5)).epsilon(1e-12));
}
