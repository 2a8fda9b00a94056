// Mixed precision by emulation (autograd/autocast.h, core/float16.h): the 16-bit rounding
// against a float64 reference written independently (frexp + nearbyint), the autocast matmul
// (rounded inputs, float32 accumulation, rounded output and gradients), fp16 overflow, and the
// loss scaler's schedule.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/float16.h"
#include "kernels/ops.h"
#include "nn/optim/loss_scale.h"

using namespace relpos;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The nearest value with `bits` significant bits (ties to even), computed in double: x = m 2^e
// with 0.5 <= |m| < 1, so m 2^bits is exact in a double and nearbyint rounds it to even.
// Below `min_normal` the spacing is fixed at `min_normal` 2^-(bits-1) (float16 subnormals);
// from `overflow` up the result is infinite.
double reference_round(double x, int bits, double min_normal, double max_finite) {
  if (std::isnan(x) || x == 0) return x;
  double r;
  if (std::fabs(x) < min_normal) {
    const double q = std::ldexp(min_normal, -(bits - 1));
    r = std::nearbyint(x / q) * q;
  } else {
    int e = 0;
    const double m = std::frexp(x, &e);
    r = std::ldexp(std::nearbyint(std::ldexp(m, bits)), e - bits);
  }
  return std::fabs(r) > max_finite ? std::copysign(kInf, x) : r;
}
double ref_fp16(double x) { return reference_round(x, 11, std::ldexp(1.0, -14), 65504.0); }
double ref_bf16(double x) {
  return reference_round(x, 8, double(std::numeric_limits<float>::min()), 3.3895313892515355e38);
}

Tensor f32(const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  return Tensor::from_vector<float>(f, {int64_t(f.size())});
}

}  // namespace

TEST_CASE("autocast: bf16/fp16 rounding ties to even, overflows and keeps subnormals as specified", "[autocast]") {
  // hand-picked: ties, the largest values, the float16 subnormals, signed zero, NaN
  const double t = std::ldexp(1.0, -24);
  const std::vector<double> fp16_in = {1.0, 1 + std::ldexp(1, -11), 1 + 3 * std::ldexp(1, -11), 65504, 65519.99,
                                       65520, -70000, t, 1.5 * t, 0.5 * t, 0.49 * t, -0.0, 3.14159265};
  const std::vector<double> fp16_out = {1.0, 1.0, 1 + std::ldexp(1, -9), 65504, 65504, kInf, -kInf, t, 2 * t, 0.0,
                                        0.0, -0.0, 3.140625};
  const std::vector<double> got16 = k::unary(k::Unary::RoundFP16, f32(fp16_in)).to_vector<double>();
  for (size_t i = 0; i < fp16_in.size(); ++i) {
    INFO(fp16_in[i]);
    CHECK(got16[i] == fp16_out[i]);
    CHECK(std::signbit(got16[i]) == std::signbit(fp16_out[i]));
  }
  const std::vector<double> bf16_in = {1.0, 1 + std::ldexp(1, -8), 1 + 3 * std::ldexp(1, -8), 3.14159265, 1e30, -2.5e-3};
  const std::vector<double> got_bf = k::unary(k::Unary::RoundBF16, f32(bf16_in)).to_vector<double>();
  CHECK(got_bf[0] == 1.0);
  CHECK(got_bf[1] == 1.0);                       // tie: to the even neighbour
  CHECK(got_bf[2] == 1 + std::ldexp(1, -6));     // tie: to the even neighbour (up)
  CHECK(got_bf[3] == 3.140625);
  CHECK(std::isnan(round_to_fp16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(round_to_bf16(std::numeric_limits<float>::max()) == std::numeric_limits<float>::infinity());
}

TEST_CASE("autocast: rounding equals an independent float64 reference over every magnitude", "[autocast]") {
  Generator g(5);
  // values spread over 2^-30 .. 2^20 (fp16 subnormals, normals, overflow) and over float's range (bf16)
  Tensor u = Tensor::rand({20000}, g, DType::F64), s = Tensor::rand({20000}, g, DType::F64);
  const std::vector<double> uu = u.to_vector<double>(), ss = s.to_vector<double>();
  std::vector<double> x16(uu.size()), xb(uu.size());
  for (size_t i = 0; i < uu.size(); ++i) {
    const double sign = ss[i] < 0.5 ? -1.0 : 1.0;
    x16[i] = double(float(sign * std::ldexp(1.0 + uu[i], int(-30 + 50 * ss[i]))));
    xb[i] = double(float(sign * std::ldexp(1.0 + uu[i], int(-120 + 245 * ss[i]))));
  }
  const std::vector<double> r16 = k::unary(k::Unary::RoundFP16, f32(x16)).to_vector<double>();
  const std::vector<double> rb = k::unary(k::Unary::RoundBF16, f32(xb)).to_vector<double>();
  int64_t bad = 0;
  for (size_t i = 0; i < x16.size(); ++i) {
    if (r16[i] != ref_fp16(x16[i])) ++bad, UNSCOPED_INFO("fp16 " << x16[i] << " -> " << r16[i]);
    if (rb[i] != ref_bf16(xb[i])) ++bad, UNSCOPED_INFO("bf16 " << xb[i] << " -> " << rb[i]);
    if (bad > 5) break;
  }
  CHECK(bad == 0);
  // float64 tensors round through float (as the CUDA kernel does)
  CHECK(k::unary(k::Unary::RoundFP16, Tensor::from_vector<double>({1.0 / 3.0}, {1})).item() ==
        ref_fp16(double(float(1.0 / 3.0))));
}

TEST_CASE("autocast: a matmul rounds its inputs, output and gradients, and fp32 leaves it untouched", "[autocast]") {
  Generator g(3);
  const Tensor a0 = Tensor::randn({3, 5}, g), b0 = Tensor::randn({5, 4}, g), w = Tensor::randn({3, 4}, g);
  for (Precision p : {Precision::BF16, Precision::FP16}) {
    INFO(enum_name(p));
    const k::Unary r = p == Precision::BF16 ? k::Unary::RoundBF16 : k::Unary::RoundFP16;
    Variable a(a0.clone(), true), b(b0.clone(), true);
    Variable y;
    {
      AutocastGuard ac(p);
      y = matmul(a, b);
    }
    sum(mul(y, Variable(w))).backward();
    const Tensor ra = k::unary(r, a0), rb = k::unary(r, b0), rw = k::unary(r, w);
    CHECK(y.data().to_vector<double>() == k::unary(r, k::matmul(ra, rb)).to_vector<double>());
    CHECK(a.grad().to_vector<double>() == k::unary(r, k::matmul(rw, rb.transpose(0, 1))).to_vector<double>());
    CHECK(b.grad().to_vector<double>() == k::unary(r, k::matmul(ra.transpose(0, 1), rw)).to_vector<double>());
    CHECK(y.data().to_vector<double>() != k::matmul(a0, b0).to_vector<double>());
  }
  Variable a(a0.clone(), true), b(b0.clone(), true);
  AutocastGuard off(Precision::FP32);
  CHECK(matmul(a, b).data().to_vector<double>() == k::matmul(a0, b0).to_vector<double>());
  CHECK(autocast_precision() == Precision::FP32);
}

TEST_CASE("autocast: fp16 overflows to inf past 65504 where bf16 and fp32 stay finite", "[autocast]") {
  // inputs exact in float16; 2 * 256 * 128 = 65536 = 2^16, past float16's largest finite 65504
  const Variable a(Tensor::full({1, 2}, 256.0)), b(Tensor::full({2, 1}, 128.0));
  auto product = [&](Precision p) {
    AutocastGuard ac(p);
    return matmul(a, b).data().item();
  };
  CHECK(std::isinf(product(Precision::FP16)));
  CHECK(product(Precision::BF16) == 65536.0);
  CHECK(product(Precision::FP32) == 65536.0);
}

TEST_CASE("autocast: the loss scaler backs off on overflow and grows after the interval", "[autocast][optim]") {
  nn::optim::LossScaler s(1024.0, 3);
  s.update(true);
  s.update(true);
  CHECK(s.scale() == 1024.0);
  s.update(true);  // third finite step in a row: doubles
  CHECK(s.scale() == 2048.0);
  CHECK(s.good_steps() == 0);
  s.update(true);
  s.update(false);  // overflow: halves and restarts the count
  CHECK(s.scale() == 1024.0);
  CHECK(s.good_steps() == 0);
  s.restore(8.0, 2);
  s.update(true);
  CHECK(s.scale() == 16.0);
  CHECK_THROWS_WITH(s.restore(8.0, 3), Catch::Contains("not a valid state"));
  CHECK_THROWS_WITH(nn::optim::LossScaler(0.0, 3), Catch::Contains("loss scale"));
}

TEST_CASE("autocast: linear is matmul(x, W^T) + b, values and gradients bit for bit, in every precision",
          "[autocast]") {
  // autograd linear (one node, the bias in the GEMM's epilogue) against the three-node graph it
  // replaced in nn::Linear.
  Generator g(5);
  const Tensor x0 = Tensor::randn({2, 3, 5}, g), w0 = Tensor::randn({4, 5}, g), b0 = Tensor::randn({4}, g),
               gy = Tensor::randn({2, 3, 4}, g);
  for (Precision p : {Precision::FP32, Precision::BF16, Precision::FP16}) {
    INFO(enum_name(p));
    Variable x1(x0.clone(), true), w1(w0.clone(), true), b1(b0.clone(), true);
    Variable x2(x0.clone(), true), w2(w0.clone(), true), b2(b0.clone(), true);
    Variable y1, y2;
    {
      AutocastGuard ac(p);
      y1 = linear(x1, w1, b1);
      y2 = matmul(x2, transpose(w2, 0, 1)) + b2;
    }
    sum(mul(y1, Variable(gy))).backward();
    sum(mul(y2, Variable(gy))).backward();
    CHECK(y1.data().to_vector<double>() == y2.data().to_vector<double>());
    CHECK(x1.grad().to_vector<double>() == x2.grad().to_vector<double>());
    CHECK(b1.grad().to_vector<double>() == b2.grad().to_vector<double>());
    // dW = g^T x directly vs (x^T g)^T: the same products; a GEMM may sum them in another order.
    const std::vector<double> d1 = w1.grad().to_vector<double>(), d2 = w2.grad().to_vector<double>();
    REQUIRE(d1.size() == d2.size());
    for (size_t i = 0; i < d1.size(); ++i) CHECK(std::abs(d1[i] - d2[i]) <= 1e-5 * (1 + std::abs(d2[i])));
  }
  // Without a bias, and the shape errors name both shapes.
  Variable x(x0.clone(), true), w(w0.clone(), true);
  CHECK(linear(x, w, Variable()).data().to_vector<double>() ==
        matmul(x, transpose(w, 0, 1)).data().to_vector<double>());
  CHECK_THROWS_WITH(linear(x, Variable(Tensor::randn({4, 6}, g)), Variable()),
                    Catch::Contains("[2, 3, 5]") && Catch::Contains("expected 6"));
}

TEST_CASE("autocast: linear with an activation is act(linear), values and gradients bit for bit, in every precision",
          "[autocast]") {
  // autograd linear(x, W, b, act) (one node, act and act' in the GEMM's epilogue) against
  // linear then the activation's own node, which nn::MLP used before.
  Generator g(6);
  const Tensor x0 = Tensor::randn({2, 3, 5}, g), w0 = Tensor::randn({4, 5}, g), b0 = Tensor::randn({4}, g),
               gy = Tensor::randn({2, 3, 4}, g);
  const auto two_nodes = [](k::Unary act, const Variable& y) {
    switch (act) {
      case k::Unary::Relu:
        return relu(y);
      case k::Unary::GeluTanh:
        return gelu(y, GeluApprox::Tanh);
      case k::Unary::Silu:
        return silu(y);
      default:
        return gelu(y);
    }
  };
  for (k::Unary act : {k::Unary::GeluErf, k::Unary::GeluTanh, k::Unary::Relu, k::Unary::Silu})
    for (Precision p : {Precision::FP32, Precision::BF16, Precision::FP16}) {
      INFO(enum_name(p) << " act " << int(act));
      Variable x1(x0.clone(), true), w1(w0.clone(), true), b1(b0.clone(), true);
      Variable x2(x0.clone(), true), w2(w0.clone(), true), b2(b0.clone(), true);
      Variable y1, y2;
      {
        AutocastGuard ac(p);
        y1 = linear(x1, w1, b1, act);
        y2 = two_nodes(act, linear(x2, w2, b2));
      }
      sum(mul(y1, Variable(gy))).backward();
      sum(mul(y2, Variable(gy))).backward();
      CHECK(y1.data().to_vector<double>() == y2.data().to_vector<double>());
      CHECK(x1.grad().to_vector<double>() == x2.grad().to_vector<double>());
      CHECK(w1.grad().to_vector<double>() == w2.grad().to_vector<double>());
      CHECK(b1.grad().to_vector<double>() == b2.grad().to_vector<double>());
    }
  // Under no_grad the derivative is not computed and no node is made.
  Variable x(x0.clone(), true), w(w0.clone(), true), b(b0.clone(), true);
  {
    NoGradGuard ng;
    const Variable y = linear(x, w, b, k::Unary::GeluErf);
    CHECK(y.data().to_vector<double>() == gelu(linear(x, w, b)).data().to_vector<double>());
    CHECK(!y.requires_grad());
  }
  CHECK_THROWS_WITH(linear(x, w, b, k::Unary::Exp), Catch::Contains("not an activation"));
}

TEST_CASE(
    "autocast: mlp is linear(linear(x, W1, b1, act), W2, b2), values and gradients bit for bit, in every precision",
    "[autocast]") {
  // autograd mlp (one node; the backward multiplies by act' in a GEMM's epilogue, k::matmul_mul)
  // against the two linear nodes nn::MLP used before. Rows 2 x 150 = 300 with F = 2048: the
  // float32 GEMM with the multiplier runs in three blocks of rows.
  Generator g(7);
  const Tensor x0 = Tensor::randn({2, 150, 24}, g), w10 = Tensor::randn({2048, 24}, g), b10 = Tensor::randn({2048}, g),
               w20 = Tensor::randn({24, 2048}, g), b20 = Tensor::randn({24}, g), gy = Tensor::randn({2, 150, 24}, g);
  for (k::Unary act : {k::Unary::GeluErf, k::Unary::Relu})
    for (Precision p : {Precision::FP32, Precision::BF16, Precision::FP16}) {
      INFO(enum_name(p) << " act " << int(act));
      std::vector<Variable> a, b;
      for (const Tensor& t : {x0, w10, b10, w20, b20}) a.emplace_back(t.clone(), true), b.emplace_back(t.clone(), true);
      Variable y1, y2;
      {
        AutocastGuard ac(p);
        y1 = mlp(a[0], a[1], a[2], a[3], a[4], act);
        y2 = linear(linear(b[0], b[1], b[2], act), b[3], b[4]);
      }
      sum(mul(y1, Variable(gy))).backward();
      sum(mul(y2, Variable(gy))).backward();
      CHECK(y1.data().to_vector<float>() == y2.data().to_vector<float>());
      for (size_t i = 0; i < a.size(); ++i) {
        INFO("gradient of input " << i);
        CHECK(a[i].grad().to_vector<float>() == b[i].grad().to_vector<float>());
      }
    }
  // Only some inputs needing gradients, no biases; refused shapes are named.
  Variable x(x0.clone(), false), w1(w10.clone(), true), w2(w20.clone(), false);
  sum(mul(mlp(x, w1, Variable(), w2, Variable(), k::Unary::GeluErf), Variable(gy))).backward();
  Variable x2(x0.clone(), false), w12(w10.clone(), true), w22(w20.clone(), false);
  sum(mul(linear(linear(x2, w12, Variable(), k::Unary::GeluErf), w22, Variable()), Variable(gy))).backward();
  CHECK(w1.grad().to_vector<float>() == w12.grad().to_vector<float>());
  CHECK_THROWS_WITH(mlp(x, w1, Variable(), Variable(Tensor::randn({24, 100}, g)), Variable(), k::Unary::GeluErf),
                    Catch::Contains("[2048, 24]") && Catch::Contains("[24, 100]"));
  CHECK_THROWS_WITH(mlp(x, w1, Variable(), w2, Variable(), k::Unary::Exp), Catch::Contains("not an activation"));
}

TEST_CASE(
    "autocast: linear and mlp with a residual are r + linear and r + mlp, values and gradients bit for bit, in "
    "every precision",
    "[autocast]") {
  // The residual added in the last GEMM's epilogue (k::matmul_add) against the add node the
  // transformer block used before. Rows 2 x 150 = 300 with N = 2048 / F = 2048: the float32 GEMMs
  // run in blocks of rows.
  Generator g(8);
  const Tensor x0 = Tensor::randn({2, 150, 24}, g), w0 = Tensor::randn({2048, 24}, g), b0 = Tensor::randn({2048}, g),
               r0 = Tensor::randn({2, 150, 2048}, g), w20 = Tensor::randn({24, 2048}, g), b20 = Tensor::randn({24}, g),
               r20 = Tensor::randn({2, 150, 24}, g), gy = Tensor::randn({2, 150, 2048}, g),
               gy2 = Tensor::randn({2, 150, 24}, g);
  for (Precision p : {Precision::FP32, Precision::BF16, Precision::FP16}) {
    INFO(enum_name(p));
    std::vector<Variable> a, b;
    for (const Tensor& t : {x0, w0, b0, r0, w20, b20, r20})
      a.emplace_back(t.clone(), true), b.emplace_back(t.clone(), true);
    Variable y1, y2, z1, z2;
    {
      AutocastGuard ac(p);
      y1 = linear(a[0], a[1], a[2], a[3]);
      y2 = b[3] + linear(b[0], b[1], b[2]);
      z1 = mlp(a[0], a[1], a[2], a[4], a[5], k::Unary::GeluErf, a[6]);
      z2 = b[6] + mlp(b[0], b[1], b[2], b[4], b[5], k::Unary::GeluErf);
    }
    (sum(mul(y1, Variable(gy))) + sum(mul(z1, Variable(gy2)))).backward();
    (sum(mul(y2, Variable(gy))) + sum(mul(z2, Variable(gy2)))).backward();
    // Counted, not compared as vectors: Catch2 would print both 614,400-element vectors on a
    // failure (minutes).
    const auto differ = [](const Tensor& u, const Tensor& v) {
      if (!u.defined() || !v.defined() || u.shape() != v.shape()) return int64_t(-1);
      const std::vector<float> x = u.to_vector<float>(), y = v.to_vector<float>();
      int64_t n = 0;
      for (size_t i = 0; i < x.size(); ++i) n += std::memcmp(&x[i], &y[i], sizeof(float)) != 0;
      return n;
    };
    CHECK(differ(y1.data(), y2.data()) == 0);
    CHECK(differ(z1.data(), z2.data()) == 0);
    for (size_t i = 0; i < a.size(); ++i) {
      INFO("input " << i);
      CHECK(differ(a[i].grad(), b[i].grad()) == 0);
    }
  }
}
