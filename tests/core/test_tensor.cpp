// Tensor core: factories, views without copies, strides/offsets, copies, RNG, formatting.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/format.h"
#include "core/tensor.h"

using namespace relpos;
using Catch::Contains;

static Tensor iota(const Shape& s, DType dt = DType::F32) {
  return Tensor::arange(0, numel_of(s), DType::I64).to(dt).view(s);
}

TEST_CASE("factories: zeros, ones, full, arange, from_vector", "[core]") {
  REQUIRE(Tensor::zeros({2, 3}).to_vector<float>() == std::vector<float>(6, 0.f));
  REQUIRE(Tensor::ones({4}, DType::F64).to_vector<double>() == std::vector<double>(4, 1.0));
  REQUIRE(Tensor::full({2}, 2.5).to_vector<float>() == std::vector<float>{2.5f, 2.5f});
  REQUIRE(Tensor::arange(3, 7).to_vector<int64_t>() == std::vector<int64_t>{3, 4, 5, 6});
  Tensor v = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  REQUIRE(v.dtype() == DType::F64);
  REQUIRE(v.at({1, 2}) == 6.0);
  REQUIRE(Tensor::scalar(3.0).dim() == 0);
  REQUIRE(Tensor::scalar(3.0).item() == 3.0);
  REQUIRE_THROWS_WITH(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}),
                      Contains("3 values") && Contains("[2, 2]"));
  REQUIRE_THROWS_WITH(Tensor::zeros({2, -1}), Contains("[2, -1]"));
}

TEST_CASE("views share storage and never copy", "[core]") {
  Tensor x = iota({2, 3, 4});
  Tensor t = x.transpose(0, 2);
  REQUIRE(t.shares_storage(x));
  REQUIRE(t.shape() == Shape{4, 3, 2});
  REQUIRE(t.strides() == Shape{1, 4, 12});
  REQUIRE_FALSE(t.is_contiguous());
  REQUIRE(t.at({3, 1, 1}) == x.at({1, 1, 3}));

  Tensor p = x.permute({1, 2, 0});
  REQUIRE(p.shape() == Shape{3, 4, 2});
  REQUIRE(p.at({2, 1, 1}) == x.at({1, 2, 1}));

  Tensor n = x.narrow(2, 1, 2);  // [2, 3, 2]
  REQUIRE(n.offset() == 1);
  REQUIRE(n.at({1, 2, 1}) == x.at({1, 2, 2}));
  Tensor s = x.slice(2, 0, 4, 2);  // every second element
  REQUIRE(s.shape() == Shape{2, 3, 2});
  REQUIRE(s.at({0, 0, 1}) == 2.0);
  REQUIRE(x.slice(1, -2, 3).shape() == Shape{2, 2, 4});
  Tensor sel = x.select(1, 2);
  REQUIRE(sel.shape() == Shape{2, 4});
  REQUIRE(sel.at({1, 3}) == x.at({1, 2, 3}));

  Tensor u = x.unsqueeze(1);
  REQUIRE(u.shape() == Shape{2, 1, 3, 4});
  REQUIRE(u.squeeze(1).shape() == x.shape());
  REQUIRE(x.unsqueeze(-1).shape() == Shape{2, 3, 4, 1});
  REQUIRE(Tensor::zeros({1, 3, 1}).squeeze().shape() == Shape{3});
  REQUIRE_THROWS_WITH(x.squeeze(0), Contains("size 2"));

  // writes through a view are visible in the base
  n.fill_(-1.0);
  REQUIRE(x.at({0, 0, 1}) == -1.0);
  REQUIRE(x.at({0, 0, 0}) == 0.0);
}

TEST_CASE("expand broadcasts with stride 0", "[core]") {
  Tensor b = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor e = b.expand({4, 3});
  REQUIRE(e.strides() == Shape{0, 1});
  REQUIRE(e.shares_storage(b));
  REQUIRE(e.at({3, 2}) == 3.0);
  REQUIRE(b.unsqueeze(1).expand({3, 5}).at({2, 4}) == 3.0);
  REQUIRE_THROWS_WITH(b.expand({4, 2}), Contains("[3]") && Contains("[4, 2]"));
}

TEST_CASE("view vs reshape on non-contiguous tensors", "[core]") {
  Tensor x = iota({4, 6});
  // contiguous: view splits and merges freely
  REQUIRE(x.view({2, 2, 6}).shares_storage(x));
  REQUIRE(x.view({-1}).shape() == Shape{24});
  REQUIRE(x.view({3, -1}).shape() == Shape{3, 8});
  // a transposed tensor cannot be flattened without a copy
  Tensor t = x.transpose(0, 1);  // [6, 4]
  REQUIRE_THROWS_WITH(t.view({24}), Contains("[6, 4]") && Contains("reshape"));
  Tensor r = t.reshape({24});
  REQUIRE_FALSE(r.shares_storage(x));
  REQUIRE(r.at({1}) == 6.0);  // t[0][1] = x[1][0]
  // but splitting a dim of a transposed view is still a view
  Tensor split = t.view({2, 3, 4});
  REQUIRE(split.shares_storage(x));
  REQUIRE(split.at({1, 0, 2}) == x.at({2, 3}));
  // narrowed rows stay viewable as long as each row run is intact
  Tensor rows = x.narrow(0, 1, 2);  // [2, 6]
  REQUIRE(rows.view({2, 2, 3}).shares_storage(x));
  REQUIRE_THROWS_WITH(x.view({5, 5}), Contains("[4, 6]") && Contains("[5, 5]"));
}

TEST_CASE("contiguous, clone, copy_ with broadcast and dtype conversion", "[core]") {
  Tensor x = iota({3, 4});
  Tensor t = x.transpose(0, 1);
  Tensor c = t.contiguous();
  REQUIRE(c.is_contiguous());
  REQUIRE_FALSE(c.shares_storage(x));
  REQUIRE(c.to_vector<float>() == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  REQUIRE(x.contiguous().shares_storage(x));
  REQUIRE_FALSE(x.clone().shares_storage(x));

  Tensor d = Tensor::zeros({2, 3}, DType::F64);
  d.copy_(Tensor::from_vector(std::vector<int64_t>{7, 8, 9}, {3}));
  REQUIRE(d.to_vector<double>() == std::vector<double>{7, 8, 9, 7, 8, 9});
  REQUIRE(iota({2}, DType::F64).to(DType::I64).to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  REQUIRE(Tensor::full({1}, 2.7).to(DType::I64).item() == 2.0);
  REQUIRE_THROWS_WITH(d.copy_(Tensor::zeros({4})), Contains("[4]") && Contains("[2, 3]"));
}

TEST_CASE("in-place ops bump the shared version counter", "[core]") {
  Tensor x = Tensor::zeros({4});
  Tensor v = x.narrow(0, 1, 2);
  REQUIRE(x.version() == 0);
  v.fill_(1.0);
  REQUIRE(x.version() == 1);
  x.copy_(Tensor::ones({4}));
  REQUIRE(v.version() == 2);
}

TEST_CASE("dim errors name the op and the rank", "[core]") {
  Tensor x = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(x.transpose(0, 2), Contains("transpose") && Contains("2 dims"));
  REQUIRE_THROWS_WITH(x.narrow(1, 2, 2), Contains("[2, 4)") && Contains("size 3"));
  REQUIRE_THROWS_WITH(x.permute({0, 0}), Contains("repeated"));
  REQUIRE_THROWS_WITH(x.item(), Contains("6 elements"));
  REQUIRE_THROWS_WITH(x.data<double>(), Contains("float32"));
}

TEST_CASE("generator: seeded, state save/restore reproduces the stream", "[core][rng]") {
  Generator a(42), b(42), c(43);
  REQUIRE(a.next_u64() == b.next_u64());
  REQUIRE(a.next_u64() != c.next_u64());
  Tensor first = Tensor::randn({100}, a);
  GeneratorState saved = a.state();
  Tensor x1 = Tensor::randn({50}, a, DType::F64);
  a.set_state(saved);
  Tensor x2 = Tensor::randn({50}, a, DType::F64);
  REQUIRE(x1.to_vector<double>() == x2.to_vector<double>());
  REQUIRE(first.to_vector<float>() != Tensor::randn({100}, a).to_vector<float>());
}

TEST_CASE("generator: normal and uniform have the right moments", "[core][rng]") {
  Generator g(7);
  const int n = 200000;
  std::vector<double> v = Tensor::randn({n}, g, DType::F64, 1.5, 2.0).to_vector<double>();
  double m = 0, s = 0;
  for (double x : v) m += x;
  m /= n;
  for (double x : v) s += (x - m) * (x - m);
  s = std::sqrt(s / (n - 1));
  REQUIRE(m == Approx(1.5).margin(0.02));  // 5 standard errors ~ 0.022
  REQUIRE(s == Approx(2.0).margin(0.02));
  std::vector<double> u = Tensor::rand({n}, g, DType::F64, -1, 3).to_vector<double>();
  double um = 0, lo = 1e9, hi = -1e9;
  for (double x : u) um += x, lo = std::min(lo, x), hi = std::max(hi, x);
  REQUIRE(um / n == Approx(1.0).margin(0.02));
  REQUIRE(lo >= -1.0);
  REQUIRE(hi < 3.0);
}

TEST_CASE("formatting prints values, shape, dtype and device", "[core]") {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2.5f, -3, 4}, {2, 2});
  std::string s = fmt::format("{}", x);
  REQUIRE(s == "tensor([[1, 2.5], [-3, 4]], shape=[2, 2], dtype=float32, device=cpu)");
  REQUIRE_THAT(fmt::format("{}", Tensor::arange(0, 100)), Contains("...") && Contains("99") && Contains("int64"));
  REQUIRE(fmt::format("{}", Tensor::scalar(2.0, DType::F64)) ==
          "tensor(2, shape=[], dtype=float64, device=cpu)");
}

TEST_CASE("an undefined tensor throws instead of crashing", "[core]") {
  Tensor t;
  REQUIRE_FALSE(t.defined());
  REQUIRE_THROWS_WITH(t.device(), Contains("undefined"));
  REQUIRE_THROWS_WITH(t.item(), Contains("undefined") || Contains("elements"));
  REQUIRE_THROWS_WITH(t.to_vector<float>(), Contains("undefined"));
  REQUIRE_THROWS_WITH(t.fill_(1.0), Contains("undefined"));
  REQUIRE_THROWS_WITH(t.version(), Contains("undefined"));
}
