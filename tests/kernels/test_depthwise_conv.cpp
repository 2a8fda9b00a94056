// The depthwise 2D convolution (k::depthwise_conv2d, autograd depthwise_conv2d) against golden
// values from an independent computation: PyTorch 2 (Debian python3-torch) in float64,
//   y = F.conv2d(x.permute(0, 3, 1, 2), w.unsqueeze(1), b, padding=1, groups=C).permute(0, 2, 3, 1)
//   (y * m).sum().backward()
// on x [1, 3, 4, 2], x[0, i, j, c] = (4 i + j + 1) / 4 * (c == 0 ? 1 : -0.5); w [2, 3, 3],
// w[c, u, v] = (3 u + v - 4) / (c + 2); b = (0.25, -1); m[0, i, j, c] = ((i + 2 j + 3 c) mod 5 - 2) / 2.
// By hand, y[0, 0, 0, 0] = 0.25 + w[0,1,1] x(0,0) + w[0,1,2] x(0,1) + w[0,2,1] x(1,0) + w[0,2,2] x(1,1)
//                        = 0.25 + 0 * 0.25 + 0.5 * 0.5 + 1.5 * 1.25 + 2 * 1.5 = 5.375 (the first golden).
#include <catch2/catch.hpp>

#include "autograd/ops.h"
#include "core/tensor.h"
#include "kernels/ops.h"

using namespace relpos;

namespace {

constexpr int64_t kH = 3, kW = 4, kC = 2, kK = 3;

Tensor golden_x() {
  std::vector<double> v;
  for (int64_t i = 0; i < kH; ++i)
    for (int64_t j = 0; j < kW; ++j)
      for (int64_t c = 0; c < kC; ++c) v.push_back(double(4 * i + j + 1) / 4.0 * (c == 0 ? 1.0 : -0.5));
  return Tensor::from_vector(v, {1, kH, kW, kC});
}
Tensor golden_w() {
  std::vector<double> v;
  for (int64_t c = 0; c < kC; ++c)
    for (int64_t u = 0; u < kK; ++u)
      for (int64_t s = 0; s < kK; ++s) v.push_back(double(3 * u + s - 4) / double(c + 2));
  return Tensor::from_vector(v, {kC, kK, kK});
}
Tensor golden_m() {
  std::vector<double> v;
  for (int64_t i = 0; i < kH; ++i)
    for (int64_t j = 0; j < kW; ++j)
      for (int64_t c = 0; c < kC; ++c) v.push_back(double((i + 2 * j + 3 * c) % 5 - 2) / 2.0);
  return Tensor::from_vector(v, {1, kH, kW, kC});
}

const std::vector<double> kY = {5.375, -2.708333333333, 7.5,  -3.416666666667, 8.625,  -3.791666666667,
                                4.625, -2.458333333333, 8.5,  -3.75,           10.0,   -4.25,
                                10.0,  -4.25,           3.625, -2.125,         -1.875, -0.291666666667,
                                -6.0,  1.083333333333,  -7.125, 1.458333333333, -7.625, 1.625};
const std::vector<double> kDx = {-0.25, 0.0,  0.75,  -0.666666666667, 1.25, 0.5,  1.5,  0.666666666667,
                                 -3.75, 1.0,  -1.25, -0.833333333333, 0.0,  -0.833333333333, 0.5, 1.0,
                                 -0.75, 0.666666666667, -1.0, 0.5, -0.25, -0.666666666667, -2.25, 0.0};
const std::vector<double> kDw = {1.0, 1.0,    -0.125, 1.625, 1.0, -0.125,  -0.75,  -3.125, -2.375,
                                 0.0, 0.5625, -0.5625, 0.0,  0.5, -0.8125, 1.0625, -0.25,  -0.8125};
const std::vector<double> kDb = {-0.5, 0.0};

void check_close(const Tensor& t, const std::vector<double>& want) {
  const std::vector<double> got = t.contiguous().to_vector<double>();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).margin(1e-9));
  }
}

}  // namespace

TEST_CASE("depthwise_conv2d: forward and gradients equal PyTorch's Conv2d(groups=C) goldens", "[kernels][conv]") {
  for (DType t : {DType::F64, DType::F32}) {
    INFO("dtype " << dtype_name(t));
    Variable x(golden_x().to(t), true), w(golden_w().to(t), true), b(Tensor::from_vector(std::vector<double>{0.25, -1.0}, {2}).to(t), true);
    Variable y = depthwise_conv2d(x, w, b);
    CHECK(y.shape() == Shape{1, kH, kW, kC});
    const double tol = t == DType::F64 ? 1e-9 : 1e-5;
    auto close = [&](const Tensor& got, const std::vector<double>& want) {
      const std::vector<double> g = got.to(DType::F64).contiguous().to_vector<double>();
      REQUIRE(g.size() == want.size());
      for (size_t i = 0; i < g.size(); ++i) {
        INFO("element " << i);
        CHECK(g[i] == Approx(want[i]).margin(tol));
      }
    };
    close(y.data(), kY);
    sum(y * Variable(golden_m().to(t))).backward();
    close(x.grad(), kDx);
    close(w.grad(), kDw);
    close(b.grad(), kDb);
  }
  // Without a bias: the same outputs less the bias, no bias gradient.
  Tensor yb = k::depthwise_conv2d(golden_x(), golden_w(), Tensor());
  std::vector<double> want = kY;
  for (size_t e = 0; e < want.size(); ++e) want[e] -= e % 2 == 0 ? 0.25 : -1.0;
  check_close(yb, want);
  k::ConvGrads g = k::depthwise_conv2d_backward(golden_m(), golden_x(), golden_w(), false);
  check_close(g.dx, kDx);
  check_close(g.dw, kDw);
  CHECK_FALSE(g.dbias.defined());
}

TEST_CASE("depthwise_conv2d: a 1x1 kernel scales each channel, and bad shapes are named errors", "[kernels][conv]") {
  Tensor x = golden_x();
  Tensor w = Tensor::from_vector(std::vector<double>{2.0, -3.0}, {2, 1, 1});
  const std::vector<double> xs = x.to_vector<double>(), ys = k::depthwise_conv2d(x, w, Tensor()).to_vector<double>();
  for (size_t e = 0; e < xs.size(); ++e) CHECK(ys[e] == xs[e] * (e % 2 == 0 ? 2.0 : -3.0));
  CHECK_THROWS_WITH(k::depthwise_conv2d(x.reshape({12, 2}), golden_w(), Tensor()),
                    Catch::Contains("depthwise_conv2d: x must be [B, H, W, C]"));
  CHECK_THROWS_WITH(k::depthwise_conv2d(x, Tensor::zeros({2, 2, 2}, DType::F64), Tensor()),
                    Catch::Contains("k odd"));
  CHECK_THROWS_WITH(k::depthwise_conv2d(x, Tensor::zeros({3, 3, 3}, DType::F64), Tensor()),
                    Catch::Contains("w must be [C, k, k] with C = 2"));
  CHECK_THROWS_WITH(k::depthwise_conv2d(x, golden_w(), Tensor::zeros({3}, DType::F64)),
                    Catch::Contains("bias must be [C] = [2]"));
  CHECK_THROWS_WITH(k::depthwise_conv2d_backward(Tensor::zeros({1, 3, 4, 1}, DType::F64), x, golden_w(), false),
                    Catch::Contains("differ in shape"));
}
