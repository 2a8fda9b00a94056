// k::rotary against the pairwise rotation written out by hand, both pair layouts; the inverse
// undoes the forward for unit (cos, sin); rope's attention layers keep their gradchecks and
// golden tests (tests/nn), which now run through this op.
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/ops.h"

using namespace relpos;

TEST_CASE("rotary rotates channel pairs by the table's angles and copies the rest", "[kernels]") {
  const int64_t N = 3, L = 4, dh = 7, half = 2;  // r = 4 rotated channels, 3 passed through
  Generator g(11);
  Tensor x = Tensor::randn({N, L, dh}, g, DType::F64);
  std::vector<double> cs(size_t(2 * L * half));
  for (int64_t m = 0; m < L; ++m)
    for (int64_t p = 0; p < half; ++p) {
      const double ang = double(m + 1) * (0.3 + p);
      cs[size_t(m * half + p)] = std::cos(ang);
      cs[size_t((L + m) * half + p)] = std::sin(ang);
    }
  Tensor table = Tensor::from_vector(cs, {2, L, half});
  const std::vector<double> X = x.to_vector<double>();
  for (bool interleaved : {false, true}) {
    INFO("interleaved " << interleaved);
    const std::vector<double> Y = k::rotary(x, table, interleaved, false).to_vector<double>();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t m = 0; m < L; ++m) {
        const size_t row = size_t((n * L + m) * dh);
        for (int64_t p = 0; p < half; ++p) {
          const size_t ia = row + size_t(interleaved ? 2 * p : p), ib = row + size_t(interleaved ? 2 * p + 1 : p + half);
          const double c = cs[size_t(m * half + p)], s = cs[size_t((L + m) * half + p)];
          CHECK(Y[ia] == Approx(X[ia] * c - X[ib] * s).margin(1e-15));
          CHECK(Y[ib] == Approx(X[ia] * s + X[ib] * c).margin(1e-15));
        }
        for (int64_t e = 2 * half; e < dh; ++e) CHECK(Y[row + size_t(e)] == X[row + size_t(e)]);
      }
    const Tensor back = k::rotary(k::rotary(x, table, interleaved, false), table, interleaved, true);
    const std::vector<double> B = back.to_vector<double>();
    for (size_t e = 0; e < X.size(); ++e) CHECK(B[e] == Approx(X[e]).margin(1e-14));
  }
  CHECK_THROWS_WITH(k::rotary(x, Tensor::zeros({2, L + 1, half}, DType::F64), false, false),
                    Catch::Contains("cos/sin table must be [2, L, r/2] = [2, 4, <= 3]"));
}

TEST_CASE(
    "rotary reads strided heads in place and returns them in the input's layout, with the bits of the "
    "contiguous input",
    "[kernels]") {
  // The heads of a projection: [B, H, L, dh] viewed from [B, L, H, dh] (rows contiguous). The
  // result must equal rotating the contiguous copy, bit for bit, and keep the [B, L, H, dh]
  // storage order (strides), so the fused attention reads it without a copy. A view that is not
  // dense (every other head) gets a contiguous result with the same values.
  const int64_t B = 2, L = 5, H = 3, dh = 8, half = 4;
  Generator g(12);
  std::vector<float> cs(size_t(2 * L * half));
  for (int64_t m = 0; m < L; ++m)
    for (int64_t p = 0; p < half; ++p) {
      cs[size_t(m * half + p)] = float(std::cos(0.7 * double(m * (p + 1))));
      cs[size_t((L + m) * half + p)] = float(std::sin(0.7 * double(m * (p + 1))));
    }
  const Tensor table = Tensor::from_vector(cs, {2, L, half});
  const Tensor base = Tensor::randn({B, L, H, dh}, g);
  const Tensor heads = base.permute({0, 2, 1, 3});  // [B, H, L, dh], not contiguous
  REQUIRE(!heads.is_contiguous());
  const Tensor wide = Tensor::randn({B, L, 2 * H, dh}, g).permute({0, 2, 1, 3}).narrow(1, 0, H);  // not dense
  for (bool interleaved : {false, true})
    for (bool inverse : {false, true}) {
      INFO("interleaved " << interleaved << " inverse " << inverse);
      const Tensor got = k::rotary(heads, table, interleaved, inverse);
      const Tensor want = k::rotary(heads.contiguous(), table, interleaved, inverse);
      CHECK(got.shape() == heads.shape());
      CHECK(got.strides() == heads.strides());
      CHECK(got.to_vector<float>() == want.to_vector<float>());
      const Tensor got_w = k::rotary(wide, table, interleaved, inverse);
      CHECK(got_w.to_vector<float>() == k::rotary(wide.contiguous(), table, interleaved, inverse).to_vector<float>());
    }
}
