// The leading-dims column-sum path of k::reduce against a straightforward loop.
#include <catch2/catch.hpp>

#include "kernels/ops.h"

using namespace relpos;

TEST_CASE("reduce: sum/mean over leading dims (column sums) match a direct loop", "[kernels]") {
  Generator g(3);
  Tensor x = Tensor::randn({5, 7, 600}, g, DType::F64);  // C = 600: nine 64-column blocks and a part
  auto v = x.to_vector<double>();
  Tensor s = k::reduce(k::Reduce::Sum, x, {0, 1}, false);
  Tensor m = k::reduce(k::Reduce::Mean, x, {0}, true);
  REQUIRE(s.shape() == Shape{600});
  REQUIRE(m.shape() == Shape{1, 7, 600});
  for (int64_t c = 0; c < 600; ++c) {
    double want = 0;
    for (int64_t r = 0; r < 35; ++r) want += v[size_t(r * 600 + c)];
    REQUIRE(s.at({c}) == Approx(want).epsilon(1e-12));
  }
  for (int64_t j = 0; j < 7; ++j) {
    double want = 0;
    for (int64_t i = 0; i < 5; ++i) want += v[size_t((i * 7 + j) * 600 + 11)];
    REQUIRE(m.at({0, j, 11}) == Approx(want / 5).epsilon(1e-12));
  }
}
