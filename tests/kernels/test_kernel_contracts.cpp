// tests/kernels/test_kernel_contracts.cpp — what single kernels promise beyond their values in
// the backend harness: causal_fill (against a hand-built mask, gradcheck), sum_squares (float64
// accumulation, independent of the thread count), adam_update (bit-identical to the unfused
// sequence of k:: ops), Floor/Ceil, and counter-based dropout draws.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "../helpers.h"
#include "autograd/ops.h"
#include "kernels/ops.h"

using namespace relpos;

namespace {

// x with the hidden cells (k_off + j > q_off + i) set to v, built element by element here.
std::vector<double> masked_by_hand(const Tensor& x, int64_t q_off, int64_t k_off, double v) {
  std::vector<double> a = x.to_vector<double>();
  const int64_t Lq = x.size(-2), Lk = x.size(-1);
  for (size_t n = 0; n < a.size(); ++n) {
    const int64_t i = int64_t(n / size_t(Lk)) % Lq, j = int64_t(n % size_t(Lk));
    if (k_off + j > q_off + i) a[n] = v;
  }
  return a;
}

}  // namespace

TEST_CASE("causal_fill hides exactly the future keys, for any offsets and strided inputs") {
  Generator g(3);
  for (auto [q_off, k_off] : {std::pair<int64_t, int64_t>{0, 0}, {5, 0}, {0, 3}, {7, 2}, {-4, 0}}) {
    Tensor x = Tensor::randn({2, 3, 5, 7}, g, DType::F32);
    Tensor got = k::causal_fill(x, q_off, k_off, -1e9);
    REQUIRE(got.to_vector<double>() == masked_by_hand(x, q_off, k_off, double(float(-1e9))));
    // a transposed (non-contiguous) view gives the same as its contiguous copy
    Tensor xt = Tensor::randn({2, 3, 7, 5}, g, DType::F64).transpose(-1, -2);
    REQUIRE(k::causal_fill(xt, q_off, k_off, 0.0).to_vector<double>() ==
            k::causal_fill(xt.contiguous(), q_off, k_off, 0.0).to_vector<double>());
  }
  Tensor inf = k::causal_fill(Tensor::zeros({3, 3}), 0, 0, -std::numeric_limits<double>::infinity());
  CHECK(std::isinf(inf.at({0, 1})));
  CHECK(inf.at({1, 1}) == 0.0);
  CHECK(k::causal_fill(Tensor::zeros({0, 4}), 0, 0, 1.0).numel() == 0);
  CHECK_THROWS_WITH(k::causal_fill(Tensor::zeros({4}), 0, 0, 1.0), Catch::Contains("expected [..., Lq, Lk]"));
}

TEST_CASE("causal_fill gradcheck: gradient 1 on visible cells, 0 on hidden ones") {
  Variable x = test::rand_var({2, 4, 6}, 11);
  test::require_gradcheck("causal_fill",
                          [](const std::vector<Variable>& in) { return causal_fill(in[0], 1, 0, -3.0) * in[0]; }, {x});
  Variable y = test::rand_var({3, 5}, 12);
  causal_fill(y, 0, 0, 0.0).backward(Tensor::ones({3, 5}, DType::F64));
  REQUIRE(y.grad().to_vector<double>() == masked_by_hand(Tensor::ones({3, 5}, DType::F64), 0, 0, 0.0));
}

TEST_CASE("sum_squares: float64 total, NaN/Inf propagate, same result at 1 and 2 threads") {
  Generator g(5);
  Tensor x = Tensor::randn({300001}, g, DType::F32);
  double ref = 0;
  for (float v : x.to_vector<float>()) ref += double(v) * double(v);
  const int before = k::num_threads();
  k::set_num_threads(1);
  const double one = k::sum_squares(x).item();
  k::set_num_threads(2);
  const double two = k::sum_squares(x).item();
  k::set_num_threads(before);
  CHECK(one == two);
  CHECK(std::abs(one - ref) <= 1e-9 * ref);
  CHECK(k::sum_squares(x).dtype() == DType::F64);
  CHECK(k::sum_squares(x.narrow(0, 0, 10).view({2, 5}).transpose(0, 1)).item() ==
        Approx(k::sum_squares(x.narrow(0, 0, 10)).item()).epsilon(1e-12));
  Tensor bad = x.clone();
  bad.narrow(0, 1234, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  CHECK(std::isnan(k::sum_squares(bad).item()));
  bad.narrow(0, 1234, 1).fill_(std::numeric_limits<double>::infinity());
  CHECK(std::isinf(k::sum_squares(bad).item()));
  CHECK(k::sum_squares(Tensor::zeros({0})).item() == 0.0);
}

// The unfused sequence may be compiled with fma contraction (GCC's default for C++), the fused
// kernel is not (-ffp-contract=off): they agree to a few ulps, not bit for bit.
TEST_CASE("adam_update matches the unfused op sequence it replaced (Adam and AdamW, f32 and f64)") {
  for (DType dt : {DType::F32, DType::F64}) {
    for (bool decoupled : {true, false}) {
      for (double wd : {0.0, 0.1}) {
        Generator g(7);
        Tensor p0 = Tensor::randn({37, 5}, g, dt), grad = Tensor::randn({37, 5}, g, dt);
        Tensor m0 = Tensor::randn({37, 5}, g, dt, 0.0, 0.1);
        Tensor v0 = k::unary(k::Unary::Abs, Tensor::randn({37, 5}, g, dt, 0.0, 0.01));
        const double lr = 3e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, t = 4;
        const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
        // reference: the sequence nn/optim/adam.cpp ran before the fused kernel
        Tensor p = p0.clone(), m = m0.clone(), v = v0.clone(), gg = grad;
        if (wd != 0.0) {
          if (decoupled) {
            k::mul_(p, 1.0 - lr * wd);
          } else {
            gg = grad.clone();
            k::add_(gg, p, wd);
          }
        }
        k::mul_(m, b1);
        k::add_(m, gg, 1.0 - b1);
        k::mul_(v, b2);
        k::add_(v, k::mul(k::unary(k::Unary::MulScalar, gg, 1.0 - b2), gg));
        Tensor denom = k::div(k::unary(k::Unary::Sqrt, v), Tensor::scalar(std::sqrt(bc2), dt));
        k::add_(denom, Tensor::scalar(eps, dt));
        k::add_(p, k::div(k::unary(k::Unary::MulScalar, m, -(lr / bc1)), denom));
        // fused
        Tensor fp = p0.clone(), fm = m0.clone(), fv = v0.clone();
        k::adam_update(fp, grad, fm, fv, k::AdamStep{lr, b1, b2, eps, wd, decoupled, bc1, bc2});
        INFO("dtype " << dtype_name(dt) << " decoupled " << decoupled << " wd " << wd);
        const double rtol = dt == DType::F32 ? 1e-6 : 1e-14;
        CHECK(test::allclose(fp, p, rtol, rtol * 1e-2));
        CHECK(test::allclose(fm, m, rtol, rtol * 1e-2));
        CHECK(test::allclose(fv, v, rtol, 1e-30));
      }
    }
  }
  Tensor p = Tensor::zeros({3}), bad = Tensor::zeros({4});
  CHECK_THROWS_WITH(k::adam_update(p, bad, Tensor::zeros({3}), Tensor::zeros({3}), k::AdamStep{}),
                    Catch::Contains("does not match the parameter"));
}

TEST_CASE("Floor and Ceil") {
  Tensor x = Tensor::from_vector(std::vector<double>{-1.5, -0.0, 0.25, 2.0, 2.75}, {5});
  CHECK(k::unary(k::Unary::Floor, x).to_vector<double>() == std::vector<double>{-2, -0.0, 0, 2, 2});
  CHECK(k::unary(k::Unary::Ceil, x).to_vector<double>() == std::vector<double>{-1, -0.0, 1, 2, 3});
}

TEST_CASE("dropout: element i uses draw offset + i of the generator (device-independent mask)") {
  Generator g(42);
  g.set_state({42, 1000});
  Tensor m = k::dropout_mask({4, 50}, 0.3, g, DType::F64);
  CHECK(g.state().offset == 1200);  // advanced by numel
  Generator serial(42);
  serial.set_state({42, 1000});
  std::vector<double> want;
  for (int i = 0; i < 200; ++i) want.push_back(serial.uniform() < 0.3 ? 0.0 : 1.0 / 0.7);
  CHECK(m.to_vector<double>() == want);
}
