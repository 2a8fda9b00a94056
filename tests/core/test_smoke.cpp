#include <catch2/catch.hpp>

#include "core/tensor.h"

using namespace relpos;

TEST_CASE("tensor: zeros has the requested shape and is zero", "[core]") {
  Tensor t = Tensor::zeros({2, 3});
  REQUIRE(t.shape() == Shape{2, 3});
  for (float v : t.to_vector<float>()) REQUIRE(v == 0.0f);
}
