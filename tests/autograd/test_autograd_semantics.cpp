// Autograd semantics: accumulation, retain_graph, no_grad, version counters, detach,
// hooks, and the engine's handling of shared subgraphs and branches without gradient.
#include <catch2/catch.hpp>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"

using namespace relpos;
using Catch::Contains;

static Variable leaf(std::vector<double> v, Shape s) {
  return Variable(Tensor::from_vector(v, s), true);
}

TEST_CASE("autograd: gradients accumulate into leaves across backward calls", "[autograd]") {
  Variable x = leaf({1, 2, 3}, {3});
  sum(x * x).backward();  // d/dx = 2x
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{2, 4, 6});
  sum(x * 3.0).backward();  // + 3
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{5, 7, 9});
  x.zero_grad();
  REQUIRE_FALSE(x.grad().defined());
}

TEST_CASE("autograd: a shared subexpression sums both paths", "[autograd]") {
  Variable x = leaf({0.5, -1.0}, {2});
  Variable y = exp(x);            // used twice
  Variable z = sum(y * y + y);    // dz/dx = (2 e^{2x} + e^x)
  z.backward();
  std::vector<double> g = x.grad().to_vector<double>();
  REQUIRE(g[0] == Approx(2 * std::exp(1.0) + std::exp(0.5)));
  REQUIRE(g[1] == Approx(2 * std::exp(-2.0) + std::exp(-1.0)));
}

TEST_CASE("autograd: second backward without retain_graph throws, with it accumulates", "[autograd]") {
  Variable x = leaf({1, 2}, {2});
  Variable y = sum(exp(x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();  // allowed: the first kept the graph
  REQUIRE(x.grad().at({0}) == Approx(2 * std::exp(1.0)));
  REQUIRE_THROWS_WITH(y.backward(), Contains("second time") && Contains("retain_graph"));
}

TEST_CASE("autograd: NoGradGuard records nothing and restores the mode", "[autograd]") {
  Variable x = leaf({1, 2}, {2});
  {
    NoGradGuard ng;
    Variable y = x * 2.0;
    REQUIRE_FALSE(y.requires_grad());
    REQUIRE(y.grad_fn() == nullptr);
    REQUIRE_THROWS_WITH(sum(y).backward(), Contains("does not require grad"));
  }
  REQUIRE(GradMode::is_enabled());
  REQUIRE((x * 2.0).requires_grad());
}

TEST_CASE("autograd: inputs without requires_grad get no graph and no grad", "[autograd]") {
  Variable a(Tensor::from_vector(std::vector<double>{1, 2}, {2}));
  Variable b = leaf({3, 4}, {2});
  REQUIRE_FALSE((a * a).requires_grad());
  sum(a * b).backward();
  REQUIRE_FALSE(a.grad().defined());
  REQUIRE(b.grad().to_vector<double>() == std::vector<double>{1, 2});
}

TEST_CASE("autograd: modifying a saved tensor in place makes backward throw, naming the op", "[autograd]") {
  Variable x = leaf({1, 2}, {2});
  Variable y = exp(x);            // exp saves its output
  Variable z = sum(y * 1.0);
  y.data().fill_(0.0);            // in-place change of the saved tensor
  REQUIRE_THROWS_WITH(z.backward(), Contains("exp") && Contains("in-place") && Contains("version"));

  Variable a = leaf({1, 2}, {2});
  Variable b = a * 2.0;           // non-leaf
  Variable c = sum(b * b);        // mul saves b
  b.data().narrow(0, 0, 1).fill_(5.0);  // through a view: same storage, same counter
  REQUIRE_THROWS_WITH(c.backward(), Contains("mul"));
}

TEST_CASE("autograd: detach cuts the graph but shares data", "[autograd]") {
  Variable x = leaf({1, 2}, {2});
  Variable y = x * 3.0;
  Variable d = y.detach();
  REQUIRE_FALSE(d.requires_grad());
  REQUIRE(d.data().shares_storage(y.data()));
  Variable z = sum(d * x);  // gradient only through the second factor
  z.backward();
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{3, 6});
}

TEST_CASE("autograd: hooks see (and may replace) gradients of leaves and non-leaves", "[autograd]") {
  Variable x = leaf({1, 2}, {2});
  Variable h = x * 2.0;
  std::vector<double> seen_h, seen_x;
  h.register_hook([&](const Tensor& g) {
    seen_h = g.to_vector<double>();
    return Tensor();
  });
  x.register_hook([&](const Tensor& g) {
    seen_x = g.to_vector<double>();
    return k::unary(k::Unary::MulScalar, g, 10.0);  // replace
  });
  sum(h * h).backward();  // dL/dh = 2h = [4, 8]; dL/dx = 2 * dL/dh = [8, 16]
  REQUIRE(seen_h == std::vector<double>{4, 8});
  REQUIRE(seen_x == std::vector<double>{8, 16});
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{80, 160});
}

TEST_CASE("autograd: a branch that receives no gradient does not stall the engine", "[autograd]") {
  // y feeds both a path that is cut by where() (no grad to one side) and a live path.
  Variable x = leaf({1, -1}, {2});
  Variable y = x * 2.0;
  Variable dead = y * 0.0 + 1.0;        // contributes 0 gradient, but is in the graph
  Variable z = sum(y * y) + sum(dead);  // dz/dx = 8x + 0
  z.backward();
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{8, -8});
}

TEST_CASE("autograd: backward argument checks", "[autograd]") {
  Variable x = leaf({1, 2}, {2});
  Variable y = x * 2.0;
  REQUIRE_THROWS_WITH(y.backward(), Contains("one-element") && Contains("[2]"));
  REQUIRE_THROWS_WITH(y.backward(Tensor::ones({3}, DType::F64)), Contains("[3]") && Contains("[2]"));
  REQUIRE_THROWS_WITH(Variable(Tensor::arange(0, 3), true), Contains("floating"));
}

TEST_CASE("autograd: backward order is deterministic for a wide graph", "[autograd]") {
  auto run = [] {
    Variable x = leaf({0.1, 0.2, 0.3}, {3});
    Variable acc = x * 0.0;
    for (int i = 0; i < 20; ++i) acc = acc + exp(x * double(i) * 0.05);
    sum(acc).backward();
    return x.grad().to_vector<double>();
  };
  REQUIRE(run() == run());
}

TEST_CASE("autograd: accumulating into a gradient another edge shares leaves that edge's gradient intact",
          "[autograd]") {
  // w = u + v hands one tensor to both u and v (add's backward); u then receives p's gradient
  // too. The engine accumulates in place only into a tensor nothing else holds, so v's
  // gradient keeps its value: dx = 2 (1 + c) + 3.
  Variable x = leaf({1, 2, 3}, {3});
  const Tensor c = Tensor::from_vector(std::vector<double>{0.5, -1, 4}, {3});
  Variable u = x * 2.0, v = x * 3.0;
  Variable p = u * Variable(c);  // created before w: w's backward runs first
  Variable w = u + v;
  sum(w + p).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2 * 1.5 + 3, 2 * 0.0 + 3, 2 * 5.0 + 3});
  // A tensor used by three ops: its three gradients summed (the in-place path).
  Variable y = leaf({1, -2}, {2});
  Variable h = y * 1.0;
  sum(h * 2.0 + h * 3.0 + h * 4.0).backward();
  CHECK(y.grad().to_vector<double>() == std::vector<double>{9, 9});
}

TEST_CASE("autograd: a leaf's first gradient becomes .grad without a copy only when nothing else holds it",
          "[autograd]") {
  // add's backward hands one tensor to both leaves: each .grad its own storage, and changing one
  // in place (as clipping and optimizers do) leaves the other's values.
  Variable a = leaf({1, 2}, {2}), b = leaf({3, 4}, {2});
  sum((a + b) * 5.0).backward();
  REQUIRE_FALSE(a.grad().shares_storage(b.grad()));
  k::mul_(a.grad(), 0.0);
  CHECK(b.grad().to_vector<double>() == std::vector<double>{5, 5});
  // A hook that keeps the gradient: .grad is a copy, so the kept tensor keeps its values.
  Variable x = leaf({1, 2}, {2});
  Tensor kept;
  x.register_hook([&](const Tensor& g) {
    kept = g;
    return Tensor();
  });
  sum(x * 3.0).backward();
  REQUIRE_FALSE(x.grad().shares_storage(kept));
  k::mul_(x.grad(), 0.0);
  CHECK(kept.to_vector<double>() == std::vector<double>{3, 3});
  // A later gradient is added out of place: a reference to the first .grad keeps its values.
  Variable y = leaf({1, 2}, {2});
  sum(y * 2.0).backward();
  const Tensor first = y.grad();
  sum(y * 3.0).backward();
  CHECK(first.to_vector<double>() == std::vector<double>{2, 2});
  CHECK(y.grad().to_vector<double>() == std::vector<double>{5, 5});

  // The predicate itself (autograd/node.cpp): held by the engine's handle and this call's only,
  // dense, the whole storage.
  Tensor t = Tensor::ones({4, 3}, DType::F64);
  {
    const Tensor g = t;  // the engine's handle (t) and the call's own (g)
    CHECK(AccumulateGrad::owned_by_leaf(g, t));
    const Tensor third = t;  // a third handle: another edge, a hook or a saved tensor
    CHECK_FALSE(AccumulateGrad::owned_by_leaf(g, t));
  }
  {
    Tensor replaced = Tensor::ones({4, 3}, DType::F64);  // a hook's new tensor, held by the call alone
    CHECK(AccumulateGrad::owned_by_leaf(replaced, t));
  }
  Tensor base = Tensor::ones({4, 3}, DType::F64);
  const Tensor part = base.narrow(0, 1, 2);
  base = Tensor();
  CHECK_FALSE(AccumulateGrad::owned_by_leaf(part, Tensor()));  // part of a larger storage
  Tensor wide = Tensor::ones({3, 4}, DType::F64);
  const Tensor tr = wide.transpose(0, 1);
  wide = Tensor();
  CHECK_FALSE(AccumulateGrad::owned_by_leaf(tr, Tensor()));  // not dense in row-major order
  Tensor off = Tensor::ones({5}, DType::F64);
  const Tensor tail = off.narrow(0, 1, 4);
  off = Tensor();
  CHECK_FALSE(AccumulateGrad::owned_by_leaf(tail, Tensor()));  // offset 1
}
