// tests/kernels/test_kernel_values.cpp — forward values of the raw kernels (kernels/ops.h)
// against results computed by hand or from closed forms (never by calling the code under
// test), and the error messages for bad inputs: mismatched shapes and dtypes, out-of-range
// indices, int64 input to float ops, cuda tensors without a GPU.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "autograd/ops.h"
#include "core/cuda_runtime.h"
#include "kernels/ops.h"

using namespace relpos;
using Catch::Contains;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

Tensor f64(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector(v, s); }
Tensor f32(const std::vector<float>& v, const Shape& s) { return Tensor::from_vector(v, s); }
Tensor i64(const std::vector<int64_t>& v, const Shape& s) { return Tensor::from_vector(v, s); }

// REQUIRE t has `shape` and values close to `expect` (infinities must match exactly).
void require_values(const Tensor& t, const Shape& shape, const std::vector<double>& expect, double tol = 1e-12) {
  INFO("got " << t.str(12));
  REQUIRE(t.shape() == shape);
  std::vector<double> got = t.to_vector<double>();
  REQUIRE(got.size() == expect.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", expected " << expect[i]);
    if (std::isinf(expect[i]))
      REQUIRE(got[i] == expect[i]);
    else
      REQUIRE(std::abs(got[i] - expect[i]) <= tol * std::max(1.0, std::abs(expect[i])));
  }
}

// Matches an exception message containing every (or, with any = true, at least one) of
// `parts`. It owns its strings, so unlike a stored `Contains(a) && Contains(b)` (which
// keeps pointers to temporaries) it can be kept in a variable and reused.
class ContainsAll : public Catch::MatcherBase<std::string> {
 public:
  ContainsAll(std::vector<std::string> parts, bool any = false) : parts_(std::move(parts)), any_(any) {}
  bool match(const std::string& s) const override {
    for (const std::string& p : parts_)
      if ((s.find(p) != std::string::npos) == any_) return any_;
    return !any_;
  }
  std::string describe() const override {
    std::string d = any_ ? "contains one of:" : "contains all of:";
    for (const std::string& p : parts_) d += " \"" + p + "\"";
    return d;
  }

 private:
  std::vector<std::string> parts_;
  bool any_;
};

// 0, 1, ..., n-1 as float64 in `shape`.
Tensor iota(const Shape& shape) {
  std::vector<double> v(size_t(numel_of(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i);
  return f64(v, shape);
}

}  // namespace

// ============================================================== elementwise

TEST_CASE("kernels: binary arithmetic with broadcasting", "[kernels]") {
  Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = f64({10, 20, 30}, {3});
  require_values(k::add(a, b), {2, 3}, {11, 22, 33, 14, 25, 36});
  require_values(k::sub(a, b), {2, 3}, {-9, -18, -27, -6, -15, -24});
  require_values(k::mul(a, b), {2, 3}, {10, 40, 90, 40, 100, 180});
  require_values(k::div(b, a), {2, 3}, {10, 10, 10, 2.5, 4, 5});
  Tensor c = f64({2, -1}, {2, 1});
  require_values(k::binary(k::Binary::Pow, a, c), {2, 3}, {1, 4, 9, 0.25, 0.2, 1.0 / 6});
  require_values(k::binary(k::Binary::Maximum, a, f64({3}, {1})), {2, 3}, {3, 3, 3, 4, 5, 6});
  require_values(k::binary(k::Binary::Minimum, a, f64({3}, {1})), {2, 3}, {1, 2, 3, 3, 3, 3});
  // [3,1] with [1,4] -> outer sum; a 0-d operand broadcasts everywhere.
  require_values(k::add(f64({0, 10, 20}, {3, 1}), f64({1, 2, 3, 4}, {1, 4})), {3, 4},
                 {1, 2, 3, 4, 11, 12, 13, 14, 21, 22, 23, 24});
  require_values(k::mul(Tensor::scalar(3.0, DType::F64), f64({1, 2}, {2})), {2}, {3, 6});
  // [3,1,4] with [2,4] -> [3,2,4]
  Tensor x = iota({3, 1, 4}), y = f64({100, 200, 300, 400, 500, 600, 700, 800}, {2, 4});
  Tensor s = k::add(x, y);
  REQUIRE(s.shape() == Shape{3, 2, 4});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t l = 0; l < 4; ++l) REQUIRE(s.at({i, j, l}) == double(4 * i + l) + 100.0 * double(4 * j + l + 1));
  // float32 and int64 arithmetic keep their dtype.
  Tensor sf = k::add(f32({1.5f, 2.5f}, {2}), f32({0.25f}, {1}));
  REQUIRE(sf.dtype() == DType::F32);
  require_values(sf, {2}, {1.75, 2.75});
  Tensor si = k::mul(i64({3, -4}, {2}), i64({5}, {1}));
  REQUIRE(si.dtype() == DType::I64);
  REQUIRE(si.to_vector<int64_t>() == std::vector<int64_t>{15, -20});
}

TEST_CASE("kernels: elementwise ops on transposed, sliced and expanded operands", "[kernels]") {
  Tensor base = iota({3, 4});                   // [[0..3],[4..7],[8..11]]
  Tensor t = base.transpose(0, 1);              // [4,3]: t[i][j] = 4j + i
  require_values(k::add(t, f64({100, 200, 300}, {3})), {4, 3},
                 {100, 204, 308, 101, 205, 309, 102, 206, 310, 103, 207, 311});
  Tensor sl = base.slice(1, 0, 4, 2);           // columns 0 and 2
  require_values(k::unary(k::Unary::MulScalar, sl, 10.0), {3, 2}, {0, 20, 40, 60, 80, 100});
  Tensor e = f64({1, 2, 3}, {3, 1}).expand({3, 4});
  require_values(k::mul(e, base), {3, 4}, {0, 1, 2, 3, 8, 10, 12, 14, 24, 27, 30, 33});
  require_values(k::sub(t.narrow(0, 1, 2), t.narrow(0, 2, 2)), {2, 3}, {-1, -1, -1, -1, -1, -1});
}

TEST_CASE("kernels: large elementwise ops take the threaded path with the same values", "[kernels]") {
  // One long contiguous row (chunked across threads) and a strided 2-d case.
  const int64_t n = 100000;
  Tensor x = iota({n});
  Tensor y = k::unary(k::Unary::AddScalar, k::unary(k::Unary::MulScalar, x, 2.0), 1.0);
  std::vector<double> v = y.to_vector<double>();
  for (int64_t i = 0; i < n; ++i) REQUIRE(v[size_t(i)] == 2.0 * double(i) + 1.0);
  Tensor m = iota({300, 400}).transpose(0, 1);  // [400, 300]: m[i][j] = 400 j + i
  Tensor col = iota({300});
  Tensor z = k::sub(m, col);                     // 399 j + i
  REQUIRE(z.shape() == Shape{400, 300});
  std::vector<double> zv = z.to_vector<double>();
  for (int64_t i = 0; i < 400; ++i)
    for (int64_t j = 0; j < 300; ++j) REQUIRE(zv[size_t(i * 300 + j)] == double(399 * j + i));
}

TEST_CASE("kernels: unary ops and their derivative kernels at known points", "[kernels]") {
  using U = k::Unary;
  const double ln2 = std::log(2.0), ln3 = std::log(3.0);
  Tensor x = f64({-2, 0.5, 3}, {3});
  require_values(k::unary(U::Neg, x), {3}, {2, -0.5, -3});
  require_values(k::unary(U::Abs, x), {3}, {2, 0.5, 3});
  require_values(k::unary(U::Sign, f64({-2, 0, 3}, {3})), {3}, {-1, 0, 1});
  require_values(k::unary(U::Relu, x), {3}, {0, 0.5, 3});
  require_values(k::unary(U::Exp, f64({0, 1, ln2}, {3})), {3}, {1, std::numbers::e, 2});
  require_values(k::unary(U::Log, f64({1, std::numbers::e, 8}, {3})), {3}, {0, 1, 3 * ln2});
  require_values(k::unary(U::Sqrt, f64({4, 0.25, 9}, {3})), {3}, {2, 0.5, 3});
  require_values(k::unary(U::Rsqrt, f64({4, 0.25, 16}, {3})), {3}, {0.5, 2, 0.25});
  // tanh(ln 2) = (4 - 1) / (4 + 1); sigmoid(ln 3) = 3/4; silu(ln 3) = ln 3 * 3/4
  require_values(k::unary(U::Tanh, f64({0, ln2, -ln2}, {3})), {3}, {0, 0.6, -0.6});
  require_values(k::unary(U::Sigmoid, f64({0, ln3, -ln3}, {3})), {3}, {0.5, 0.75, 0.25});
  require_values(k::unary(U::Silu, f64({0, ln3, -ln3}, {3})), {3}, {0, 0.75 * ln3, -0.25 * ln3});
  require_values(k::unary(U::AddScalar, x, 1.5), {3}, {-0.5, 2, 4.5});
  require_values(k::unary(U::MulScalar, x, -2.0), {3}, {4, -1, -6});
  require_values(k::unary(U::PowScalar, f64({4, 9, 2}, {3}), 0.5), {3}, {2, 3, std::sqrt(2.0)});
  require_values(k::unary(U::PowScalar, f64({2, -3, 0.5}, {3}), 3.0), {3}, {8, -27, 0.125});
  require_values(k::unary(U::RPowScalar, f64({3, -1, 0.5}, {3}), 2.0), {3}, {8, 0.5, std::sqrt(2.0)});
  require_values(k::unary(U::Clamp, f64({-3, -1, 0, 1, 3}, {5}), -1.0, 2.0), {5}, {-1, -1, 0, 1, 2});
  require_values(k::unary(U::ClampMask, f64({-3, -1, 0, 2, 3}, {5}), -1.0, 2.0), {5}, {0, 1, 1, 1, 0});
  // derivative kernels
  require_values(k::unary(U::ReluGrad, x), {3}, {0, 1, 1});
  require_values(k::unary(U::TanhGradFromY, f64({0, 0.6}, {2})), {2}, {1, 0.64});
  require_values(k::unary(U::SigmoidGradFromY, f64({0.5, 0.75}, {2})), {2}, {0.25, 0.1875});
  // d/dx silu at 0 = 1/2; at ln 3: s (1 + x (1 - s)) with s = 3/4
  require_values(k::unary(U::SiluGrad, f64({0, ln3}, {2})), {2}, {0.5, 0.75 * (1 + ln3 * 0.25)});
  // d/dx gelu at 0 = 1/2 for both; erf form at 1: Phi(1) + phi(1)
  const double phi1 = std::exp(-0.5) / std::sqrt(2 * std::numbers::pi);
  require_values(k::unary(U::GeluErfGrad, f64({0, 1}, {2})), {2}, {0.5, 0.8413447460685429 + phi1});
  require_values(k::unary(U::GeluTanhGrad, f64({0}, {1})), {1}, {0.5});
  // float32 inputs give float32 outputs
  Tensor yf = k::unary(U::Sqrt, f32({4, 16}, {2}));
  REQUIRE(yf.dtype() == DType::F32);
  require_values(yf, {2}, {2, 4});
}

TEST_CASE("kernels: gelu erf and tanh approximations at known values", "[kernels]") {
  // x * Phi(x) (exact) and the tanh approximation, precomputed from the closed forms.
  Tensor x = f64({1, -1, 2, -0.5, 0.5, 3}, {6});
  require_values(k::unary(k::Unary::GeluErf, x), {6},
                 {0.8413447460685429, -0.15865525393145707, 1.9544997361036416, -0.15426876936299344,
                  0.34573123063700656, 2.99595030590511});
  require_values(k::unary(k::Unary::GeluTanh, x), {6},
                 {0.8411919906082768, -0.15880800939172324, 1.954597694087775, -0.15428599017485606,
                  0.34571400982514394, 2.996362607918227});
  // The two agree to ~2e-4 but are not the same function.
  std::vector<double> e = k::unary(k::Unary::GeluErf, x).to_vector<double>();
  std::vector<double> t = k::unary(k::Unary::GeluTanh, x).to_vector<double>();
  for (size_t i = 0; i < e.size(); ++i) REQUIRE(std::abs(e[i] - t[i]) < 5e-4);
  REQUIRE(std::abs(e[0] - t[0]) > 1e-4);
  // float32 within float32 rounding
  require_values(k::unary(k::Unary::GeluErf, f32({1, -1}, {2})), {2}, {0.8413447460685429, -0.15865525393145707},
                 1e-6);
  require_values(k::unary(k::Unary::GeluTanh, f32({1, -1}, {2})), {2}, {0.8411919906082768, -0.15880800939172324},
                 1e-6);
  // autograd gelu picks the matching kernel
  Variable v(x);
  require_values(gelu(v, GeluApprox::Tanh).data(), {6},
                 {0.8411919906082768, -0.15880800939172324, 1.954597694087775, -0.15428599017485606,
                  0.34571400982514394, 2.996362607918227});
  require_values(gelu(v).data(), {6},
                 {0.8413447460685429, -0.15865525393145707, 1.9544997361036416, -0.15426876936299344,
                  0.34573123063700656, 2.99595030590511});
}

TEST_CASE("kernels: comparisons return 1/0 in the operands' dtype", "[kernels]") {
  using B = k::Binary;
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = f32({2, 2, 7}, {3});
  auto cmp = [&](B op) {
    Tensor r = k::binary(op, a, b);
    REQUIRE(r.dtype() == DType::F32);
    return r;
  };
  require_values(cmp(B::Eq), {2, 3}, {0, 1, 0, 0, 0, 0});
  require_values(cmp(B::Ne), {2, 3}, {1, 0, 1, 1, 1, 1});
  require_values(cmp(B::Lt), {2, 3}, {1, 0, 1, 0, 0, 1});
  require_values(cmp(B::Le), {2, 3}, {1, 1, 1, 0, 0, 1});
  require_values(cmp(B::Gt), {2, 3}, {0, 0, 0, 1, 1, 0});
  require_values(cmp(B::Ge), {2, 3}, {0, 1, 0, 1, 1, 0});
  Tensor ri = k::binary(B::Lt, i64({1, 5}, {2}), i64({3}, {1}));
  REQUIRE(ri.dtype() == DType::I64);
  REQUIRE(ri.to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  // autograd comparison helpers are the same kernels
  Variable va(a), vb(b);
  require_values(ge(va, vb), {2, 3}, {0, 1, 0, 1, 1, 0});
  require_values(eq(va, vb), {2, 3}, {0, 1, 0, 0, 0, 0});
}

TEST_CASE("kernels: where and masked_fill with broadcasting", "[kernels]") {
  Tensor cond = i64({1, 0}, {2, 1});
  Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = f64({-1}, {1});
  require_values(k::where(cond, a, b), {2, 3}, {1, 2, 3, -1, -1, -1});
  // float condition, broadcast a and b: [3] cond, [2,1] a, [3] b
  Tensor c2 = f32({0, 1, 0.5f}, {3});
  require_values(k::where(c2, f64({10, 20}, {2, 1}), f64({7, 8, 9}, {3})), {2, 3}, {7, 10, 10, 7, 20, 20});
  require_values(k::masked_fill(a, f64({0, 1, 0}, {3}), -5.0), {2, 3}, {1, -5, 3, 4, -5, 6});
  require_values(k::masked_fill(a, i64({1, 0}, {2, 1}), -kInf), {2, 3}, {-kInf, -kInf, -kInf, 4, 5, 6});
  // the mask must broadcast to x's shape, not the other way round
  REQUIRE_THROWS_WITH(k::masked_fill(f64({1, 2, 3}, {3}), i64({1, 0, 1, 0, 1, 0}, {2, 3}), 0.0),
                      Contains("[2, 3]") && Contains("[3]"));
}

// ============================================================== reductions

TEST_CASE("kernels: sum and mean over dims with and without keepdim", "[kernels]") {
  Tensor x = iota({2, 3, 4});  // x[b][j][c] = 12 b + 4 j + c
  require_values(k::sum(x), {}, {276});
  require_values(k::sum(x, {}, true), {1, 1, 1}, {276});
  require_values(k::sum(x, {0}), {3, 4}, {12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34});
  require_values(k::sum(x, {1}, true), {2, 1, 4}, {12, 15, 18, 21, 48, 51, 54, 57});
  require_values(k::sum(x, {0, 2}), {3}, {60, 92, 124});
  require_values(k::sum(x, {2, 0}, true), {1, 3, 1}, {60, 92, 124});
  require_values(k::sum(x, {-1}), {2, 3}, {6, 22, 38, 54, 70, 86});
  require_values(k::reduce(k::Reduce::Mean, x, {-1}, false), {2, 3}, {1.5, 5.5, 9.5, 13.5, 17.5, 21.5});
  require_values(k::reduce(k::Reduce::Mean, x, {}, false), {}, {11.5});
  require_values(k::reduce(k::Reduce::Mean, x, {0, -2}, true), {1, 1, 4}, {10, 11, 12, 13});
  // float32 input accumulates in double and returns float32
  Tensor xf = f32({0.5f, 0.25f, 0.125f, 1.0f}, {2, 2});
  Tensor sf = k::sum(xf, {1});
  REQUIRE(sf.dtype() == DType::F32);
  require_values(sf, {2}, {0.75, 1.125});
}

TEST_CASE("kernels: max, min and logsumexp reductions", "[kernels]") {
  Tensor x = f64({1, 5, 3, -2, -7, -1}, {2, 3});
  require_values(k::reduce(k::Reduce::Max, x, {1}, false), {2}, {5, -1});
  require_values(k::reduce(k::Reduce::Min, x, {1}, false), {2}, {1, -7});
  require_values(k::reduce(k::Reduce::Max, x, {0}, true), {1, 3}, {1, 5, 3});
  require_values(k::reduce(k::Reduce::Min, x, {}, false), {}, {-7});
  require_values(k::reduce(k::Reduce::Max, x, {-1, -2}, false), {}, {5});
  const double ln2 = std::log(2.0), ln5 = std::log(5.0);
  require_values(k::reduce(k::Reduce::LogSumExp, f64({0, ln2, ln5, 1000, 1000, 1000}, {2, 3}), {1}, false), {2},
                 {std::log(8.0), 1000 + std::log(3.0)});
  require_values(k::reduce(k::Reduce::LogSumExp, f64({0, ln2, ln5, 0}, {2, 2}), {0}, true), {1, 2},
                 {std::log(6.0), std::log(3.0)});
  require_values(k::reduce(k::Reduce::LogSumExp, f64({-kInf, -kInf, -1000, -1000}, {2, 2}), {1}, false), {2},
                 {-kInf, -1000 + ln2});
}

TEST_CASE("kernels: var with corrections, several dims and keepdim", "[kernels]") {
  Tensor v = f64({1, 2, 3, 4}, {4});  // mean 2.5, sum of squared deviations 5
  require_values(k::reduce(k::Reduce::Var, v, {}, false), {}, {5.0 / 3});
  require_values(k::reduce(k::Reduce::Var, v, {}, false, 0), {}, {1.25});
  require_values(k::reduce(k::Reduce::Var, v, {0}, true, 2), {1}, {2.5});
  Tensor x = f64({1, 2, 3, 4, 2, 4, 6, 8}, {2, 4});
  require_values(k::reduce(k::Reduce::Var, x, {1}, false), {2}, {5.0 / 3, 20.0 / 3});
  require_values(k::reduce(k::Reduce::Var, x, {-1}, true, 0), {2, 1}, {1.25, 5});
  require_values(k::reduce(k::Reduce::Var, x, {0}, true), {1, 4}, {0.5, 2, 4.5, 8});
  // all 8: mean 3.75, sum of squares 150 -> squared deviations 37.5
  require_values(k::reduce(k::Reduce::Var, x, {0, 1}, false), {}, {37.5 / 7});
  require_values(k::reduce(k::Reduce::Var, x, {}, true, 0), {1, 1}, {37.5 / 8});
  require_values(k::reduce(k::Reduce::Var, f32({1, 2, 3, 4}, {4}), {}, false), {}, {5.0 / 3}, 1e-6);
}

TEST_CASE("kernels: reductions of transposed and permuted inputs", "[kernels]") {
  Tensor x = iota({2, 3, 4});
  Tensor p = x.permute({2, 0, 1});  // [4, 2, 3]: p[c][b][j] = x[b][j][c]
  require_values(k::sum(p, {1, 2}), {4}, {60, 66, 72, 78});
  require_values(k::sum(p, {0}), {2, 3}, {6, 22, 38, 54, 70, 86});
  require_values(k::reduce(k::Reduce::Max, p, {-1}, true), {4, 2, 1}, {8, 20, 9, 21, 10, 22, 11, 23});
  Tensor t = iota({3, 4}).transpose(0, 1);  // [4, 3]: t[i][j] = 4 j + i
  require_values(k::reduce(k::Reduce::Mean, t, {1}, false), {4}, {4, 5, 6, 7});
  require_values(k::reduce(k::Reduce::Var, t, {1}, false), {4}, {16, 16, 16, 16});
}

TEST_CASE("kernels: large reductions take the threaded path with the same values", "[kernels]") {
  Tensor x = Tensor::ones({64, 1024}, DType::F32);
  require_values(k::sum(x, {1}), {64}, std::vector<double>(64, 1024.0));
  require_values(k::reduce(k::Reduce::Max, iota({64, 1024}), {1}, false), {64}, [] {
    std::vector<double> e(64);
    for (size_t r = 0; r < 64; ++r) e[r] = double(r * 1024 + 1023);
    return e;
  }());
}

TEST_CASE("kernels: sum_to reduces broadcast dims", "[kernels]") {
  Tensor g = iota({2, 3, 4});
  require_values(k::sum_to(g, {3, 1}), {3, 1}, {60, 92, 124});
  require_values(k::sum_to(g, {4}), {4}, {60, 66, 72, 78});
  require_values(k::sum_to(g, {2, 1, 1}), {2, 1, 1}, {66, 210});
  require_values(k::sum_to(g, {}), {}, {276});
  REQUIRE(k::sum_to(g, {2, 3, 4}).shares_storage(g));
  REQUIRE_THROWS_WITH(k::sum_to(g, {2, 4}), Contains("[2, 3, 4]") && Contains("[2, 4]"));
}

// ============================================================== matmul

TEST_CASE("kernels: matmul 2-D known products", "[kernels]") {
  Tensor a = f64({1, 2, 3, 4}, {2, 2}), b = f64({5, 6, 7, 8}, {2, 2});
  require_values(k::matmul(a, b), {2, 2}, {19, 22, 43, 50});
  require_values(k::matmul(f64({1, 2, 3, 4, 5, 6}, {2, 3}), f64({1, 0, -1}, {3, 1})), {2, 1}, {-2, -2});
  require_values(k::matmul(f64({1, 2, 3}, {1, 3}), f64({4, 5, 6}, {3, 1})), {1, 1}, {32});
  Tensor af = f32({1, 2, 3, 4}, {2, 2}), bf = f32({5, 6, 7, 8}, {2, 2});
  Tensor cf = k::matmul(af, bf);
  REQUIRE(cf.dtype() == DType::F32);
  require_values(cf, {2, 2}, {19, 22, 43, 50});
}

TEST_CASE("kernels: matmul with transposed, narrowed and strided operands", "[kernels]") {
  // a^T of [[1,3],[2,4]] is [[1,2],[3,4]]
  Tensor at = f64({1, 3, 2, 4}, {2, 2}).transpose(0, 1);
  Tensor bt = f64({5, 7, 6, 8}, {2, 2}).transpose(0, 1);
  require_values(k::matmul(at, f64({5, 6, 7, 8}, {2, 2})), {2, 2}, {19, 22, 43, 50});
  require_values(k::matmul(f64({1, 2, 3, 4}, {2, 2}), bt), {2, 2}, {19, 22, 43, 50});
  require_values(k::matmul(at, bt), {2, 2}, {19, 22, 43, 50});
  // narrowed (leading dimension larger than the row) and step-sliced (copied) operands
  Tensor wide = f64({9, 1, 2, 9, 9, 3, 4, 9}, {2, 4}).narrow(1, 1, 2);  // [[1,2],[3,4]]
  require_values(k::matmul(wide, f64({5, 6, 7, 8}, {2, 2})), {2, 2}, {19, 22, 43, 50});
  Tensor stepped = f64({1, 9, 2, 9, 3, 9, 4, 9}, {2, 4}).slice(1, 0, 4, 2);  // [[1,2],[3,4]]
  require_values(k::matmul(stepped, f64({5, 6, 7, 8}, {2, 2})), {2, 2}, {19, 22, 43, 50});
  // a transposed [3,2] operand against a [2,3] one: (x^T)(y) with x = [[1,2,3],[4,5,6]]
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  require_values(k::matmul(x.transpose(0, 1), x), {3, 3}, {17, 22, 27, 22, 29, 36, 27, 36, 45});
  require_values(k::matmul(x, x.transpose(0, 1)), {2, 2}, {14, 32, 32, 77});
}

TEST_CASE("kernels: batched matmul with broadcast batch dims and a 2-D weight", "[kernels]") {
  // a: [2,1,2,2] holds A0 = [[1,2],[3,4]], A1 = [[5,6],[7,8]]; b: [3,2,2] holds I, 2I, swap.
  Tensor a = f64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 1, 2, 2});
  Tensor b = f64({1, 0, 0, 1, 2, 0, 0, 2, 0, 1, 1, 0}, {3, 2, 2});
  require_values(k::matmul(a, b), {2, 3, 2, 2},
                 {1, 2, 3, 4, 2, 4, 6, 8, 2, 1, 4, 3,        // A0 @ {I, 2I, swap}
                  5, 6, 7, 8, 10, 12, 14, 16, 6, 5, 8, 7});  // A1 @ {I, 2I, swap}
  // batched @ 2-D weight (one folded GEMM) and 2-D @ batched
  Tensor swap = f64({0, 1, 1, 0}, {2, 2});
  require_values(k::matmul(f64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}), swap), {2, 2, 2}, {2, 1, 4, 3, 6, 5, 8, 7});
  require_values(k::matmul(swap, f64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2})), {2, 2, 2}, {3, 4, 1, 2, 7, 8, 5, 6});
  // a permuted (non-foldable) batched operand with a 2-D weight: p[i] = rows i of both x blocks
  Tensor xb = f64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}).permute({1, 0, 2});  // [[1,2],[5,6]], [[3,4],[7,8]]
  require_values(k::matmul(xb, swap), {2, 2, 2}, {2, 1, 6, 5, 4, 3, 8, 7});
  // batched with a transposed batched operand
  require_values(k::matmul(f64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}), b.narrow(0, 1, 2).transpose(-1, -2)),
                 {2, 2, 2}, {2, 4, 6, 8, 6, 5, 8, 7});
  // float32 batched
  require_values(k::matmul(a.to(DType::F32), b.to(DType::F32)).narrow(1, 2, 1), {2, 1, 2, 2},
                 {2, 1, 4, 3, 6, 5, 8, 7});
}

// ============================================================== softmax family

TEST_CASE("kernels: softmax and log_softmax at known values", "[kernels]") {
  const double ln2 = std::log(2.0), ln3 = std::log(3.0), ln5 = std::log(5.0);
  Tensor x = f64({0, ln2, ln5, 1000, 1000 + ln3, 1000}, {2, 3});
  require_values(k::softmax(x, -1), {2, 3}, {0.125, 0.25, 0.625, 0.2, 0.6, 0.2});
  require_values(k::log_softmax(x, 1), {2, 3},
                 {std::log(0.125), std::log(0.25), std::log(0.625), std::log(0.2), std::log(0.6), std::log(0.2)});
  // along dim 0: columns [0, ln3], [ln2, 0]
  Tensor y = f64({0, ln2, ln3, 0}, {2, 2});
  require_values(k::softmax(y, 0), {2, 2}, {0.25, 2.0 / 3, 0.75, 1.0 / 3});
  require_values(k::log_softmax(y, -2), {2, 2}, {std::log(0.25), std::log(2.0 / 3), std::log(0.75), std::log(1.0 / 3)});
  // softmax of a transposed view along its last dim
  require_values(k::softmax(y.transpose(0, 1), 1), {2, 2}, {0.25, 0.75, 2.0 / 3, 1.0 / 3});
  // float32
  require_values(k::softmax(f32({0, float(ln3)}, {2}), 0), {2}, {0.25, 0.75}, 1e-6);
}

TEST_CASE("kernels: softmax rows with -inf masked entries", "[kernels]") {
  // Row 0: every entry but one masked; row 1: two masked; row 2: fully masked (zeros).
  Tensor x = f64({-kInf, 0.5, -kInf, -kInf, 0, -kInf, std::log(3.0), -kInf, -kInf, -kInf, -kInf, -kInf}, {3, 4});
  require_values(k::softmax(x, -1), {3, 4}, {0, 1, 0, 0, 0.25, 0, 0.75, 0, 0, 0, 0, 0});
  Tensor ls = k::log_softmax(x.narrow(0, 0, 2), -1);
  require_values(ls, {2, 4}, {-kInf, 0, -kInf, -kInf, std::log(0.25), -kInf, std::log(0.75), -kInf});
  // backward through the masked row leaves masked entries at exactly 0
  Tensor yb = k::softmax(x.narrow(0, 0, 2), -1);
  require_values(k::softmax_backward(yb, f64({1, 2, 3, 4, 1, 2, 3, 4}, {2, 4}), -1), {2, 4},
                 {0, 0, 0, 0, 0.25 * (1 - 2.5), 0, 0.75 * (3 - 2.5), 0});
}

TEST_CASE("kernels: softmax and log_softmax backward at known values", "[kernels]") {
  // y = softmax = [0.25, 0.75], g = [1, 0]: dx = y (g - y.g) = [0.1875, -0.1875]
  Tensor y = f64({0.25, 0.75}, {1, 2}), g = f64({1, 0}, {1, 2});
  require_values(k::softmax_backward(y, g, -1), {1, 2}, {0.1875, -0.1875});
  // y = log_softmax, dx = g - exp(y) sum(g) = [0.75, -0.75]
  Tensor ly = f64({std::log(0.25), std::log(0.75)}, {1, 2});
  require_values(k::log_softmax_backward(ly, g, 1), {1, 2}, {0.75, -0.75});
  // along dim 0 with a transposed gradient
  require_values(k::softmax_backward(y.transpose(0, 1), g.transpose(0, 1), 0), {2, 1}, {0.1875, -0.1875});
}

// ============================================================== normalisation

TEST_CASE("kernels: layer_norm at known values", "[kernels]") {
  // Row [1,2,3,4]: mean 2.5, biased var 1.25; row [2,2,2,2]: var 0 -> y = 0, rstd = 1/sqrt(eps).
  const double eps = 1e-5;
  const double r = 1.0 / std::sqrt(1.25 + eps);
  Tensor x = f64({1, 2, 3, 4, 2, 2, 2, 2}, {2, 4});
  k::NormOut o = k::layer_norm(x, Tensor(), Tensor(), eps);
  require_values(o.y, {2, 4}, {-1.5 * r, -0.5 * r, 0.5 * r, 1.5 * r, 0, 0, 0, 0});
  require_values(o.mean, {2}, {2.5, 2});
  require_values(o.rstd, {2}, {r, 1.0 / std::sqrt(eps)});
  Tensor w = f64({1, 2, 1, 2}, {4}), b = f64({0, 1, 0, -1}, {4});
  k::NormOut ow = k::layer_norm(x, w, b, eps);
  require_values(ow.y, {2, 4}, {-1.5 * r, -1.0 * r + 1, 0.5 * r, 3.0 * r - 1, 0, 1, 0, -1});
  // eps = 0 on a transposed input: columns [1,2,3,4] and [10,20,30,40] normalise alike
  Tensor xt = f64({1, 10, 2, 20, 3, 30, 4, 40}, {4, 2}).transpose(0, 1);
  const double r0 = 1.0 / std::sqrt(1.25);
  k::NormOut ot = k::layer_norm(xt, Tensor(), Tensor(), 0.0);
  require_values(ot.y, {2, 4}, {-1.5 * r0, -0.5 * r0, 0.5 * r0, 1.5 * r0, -1.5 * r0, -0.5 * r0, 0.5 * r0, 1.5 * r0});
  require_values(ot.mean, {2}, {2.5, 25});
  // 3-d input: stats per row of the last dim
  k::NormOut o3 = k::layer_norm(f64({0, 2, 5, 7, 3, 1, 4, 8}, {2, 2, 2}), Tensor(), Tensor(), 0.0);
  require_values(o3.y, {2, 2, 2}, {-1, 1, -1, 1, 1, -1, -1, 1});
  require_values(o3.mean, {2, 2}, {1, 6, 2, 6});
  // float32 and autograd wrapper
  require_values(k::layer_norm(x.to(DType::F32), w.to(DType::F32), b.to(DType::F32), eps).y, {2, 4},
                 {-1.5 * r, -1.0 * r + 1, 0.5 * r, 3.0 * r - 1, 0, 1, 0, -1}, 1e-6);
  require_values(layer_norm(Variable(x), Variable(w), Variable(b), eps).data(), {2, 4},
                 {-1.5 * r, -1.0 * r + 1, 0.5 * r, 3.0 * r - 1, 0, 1, 0, -1});
}

TEST_CASE("kernels: rms_norm at known values", "[kernels]") {
  // Row [3,4]: mean square 12.5; row [1,-1]: mean square 1.
  const double eps = 1e-6;
  const double r = 1.0 / std::sqrt(12.5 + eps), r1 = 1.0 / std::sqrt(1.0 + eps);
  Tensor x = f64({3, 4, 1, -1}, {2, 2});
  k::NormOut o = k::rms_norm(x, Tensor(), eps);
  require_values(o.y, {2, 2}, {3 * r, 4 * r, r1, -r1});
  require_values(o.rstd, {2}, {r, r1});
  REQUIRE_FALSE(o.mean.defined());
  require_values(k::rms_norm(x, f64({2, -0.5}, {2}), eps).y, {2, 2}, {6 * r, -2 * r, 2 * r1, 0.5 * r1});
  // transposed input, eps 0: rows [3, 4] and [0, 5] -> rms 12.5
  Tensor xt = f64({3, 0, 4, 5}, {2, 2}).transpose(0, 1);
  const double r0 = 1.0 / std::sqrt(12.5);
  require_values(k::rms_norm(xt, Tensor(), 0.0).y, {2, 2}, {3 * r0, 4 * r0, 0, 5 * r0});
  require_values(rms_norm(Variable(x), Variable(), eps).data(), {2, 2}, {3 * r, 4 * r, r1, -r1});
}

// The float32 kernels compute in float32 (kernels/cpu/norm.cpp): against the float64 kernels on
// the same (float32) values, rows of width 128 and 256 (the models' d_model), 130 rows (chunks of
// 64 rows and a part chunk), values with a mean far from zero (a float32 mean summed in order, as
// clang's build did, was 2.6e-6 of the output off at mean 50: the row statistics are float64). Tolerances relative to
// the largest |value| of each output: 2e-6 (a few float32 roundings of values about 1); the dw / db sums over 130 rows:
// 2e-6 of the sum of |terms|.
TEST_CASE("kernels: float32 layer_norm and rms_norm within float32 rounding of float64", "[kernels]") {
  Generator gen(11);
  // max |t|, and sum |t| over t's elements (a float64 tensor)
  const auto stat = [](const Tensor& t, bool sum) {
    const Tensor d = t.contiguous();
    double m = 0;
    for (int64_t i = 0; i < d.numel(); ++i)
      m = sum ? m + std::abs(d.data<double>()[i]) : std::max(m, std::abs(d.data<double>()[i]));
    return m;
  };
  const auto close = [](const Tensor& got, const Tensor& want, double scale, const char* what) {
    INFO(what);
    const Tensor g = got.to(DType::F64), w = want.contiguous();
    REQUIRE(g.shape() == w.shape());
    double worst = 0;
    for (int64_t i = 0; i < w.numel(); ++i)
      worst = std::max(worst, std::abs(g.data<double>()[i] - w.data<double>()[i]));
    INFO("largest difference " << worst << " against a scale of " << scale);
    CHECK(worst <= 2e-6 * scale);
  };
  for (const int64_t D : {128, 256})
    for (const float offset : {0.0f, 50.0f}) {
      INFO("D = " << D << ", offset " << offset);
      const Tensor x32 = Tensor::randn({130, D}, gen), w32 = Tensor::randn({D}, gen), b32 = Tensor::randn({D}, gen),
                   gy32 = Tensor::randn({130, D}, gen);
      for (int64_t i = 0; i < x32.numel(); ++i) x32.data<float>()[i] = 3.0f * x32.data<float>()[i] + offset;
      const Tensor x = x32.to(DType::F64), w = w32.to(DType::F64), b = b32.to(DType::F64), gy = gy32.to(DType::F64);
      const k::NormOut o32 = k::layer_norm(x32, w32, b32, 1e-5), o = k::layer_norm(x, w, b, 1e-5);
      close(o32.y, o.y, stat(o.y, false), "layer_norm y");
      close(o32.mean, o.mean, stat(o.mean, false), "layer_norm mean");
      close(o32.rstd, o.rstd, stat(o.rstd, false), "layer_norm rstd");
      const k::NormGrads g32 = k::layer_norm_backward(gy32, x32, o32.mean, o32.rstd, w32, true);
      const k::NormGrads g = k::layer_norm_backward(gy, x, o.mean, o.rstd, w, true);
      close(g32.dx, g.dx, stat(g.dx, false), "layer_norm dx");
      // the column sums' scale: the sum of |gy| over a column (|xhat| is at most ~4 here)
      const double col = stat(gy, true) / double(D);
      close(g32.dweight, g.dweight, 4.0 * col, "layer_norm dw");
      close(g32.dbias, g.dbias, col, "layer_norm db");
      const k::NormOut r32 = k::rms_norm(x32, w32, 1e-6), r = k::rms_norm(x, w, 1e-6);
      close(r32.y, r.y, stat(r.y, false), "rms_norm y");
      const k::NormGrads rg32 = k::rms_norm_backward(gy32, x32, r32.rstd, w32);
      const k::NormGrads rg = k::rms_norm_backward(gy, x, r.rstd, w);
      close(rg32.dx, rg.dx, stat(rg.dx, false), "rms_norm dx");
      close(rg32.dweight, rg.dweight, 4.0 * col, "rms_norm dw");
    }
}

// ============================================================== indexing

TEST_CASE("kernels: embedding and its scatter-add backward", "[kernels]") {
  Tensor w = f64({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2});
  Tensor idx = i64({3, 0, 3, 1}, {2, 2});
  require_values(k::embedding(w, idx), {2, 2, 2}, {30, 31, 0, 1, 30, 31, 10, 11});
  require_values(k::embedding(w.to(DType::F32), i64({2}, {1})), {1, 2}, {20, 21});
  // transposed weight: w^T of [[0,10,20,30],[1,11,21,31]]
  Tensor wt = f64({0, 10, 20, 30, 1, 11, 21, 31}, {2, 4}).transpose(0, 1);
  require_values(k::embedding(wt, idx), {2, 2, 2}, {30, 31, 0, 1, 30, 31, 10, 11});
  Tensor gy = f64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  // row 3 gets rows 0 and 2 of gy, row 0 gets row 1, row 1 gets row 3, row 2 nothing
  require_values(k::embedding_backward(gy, idx, 4), {4, 2}, {3, 4, 7, 8, 0, 0, 6, 8});
}

// Big enough for the threads (n * D >= 32768), D not a multiple of the 16-column groups the
// threads own, repeated indices: every element is the float32 sum of its rows in index order
// (written out here), the same bits at 1, 2 and 3 threads.
TEST_CASE("kernels: embedding_backward adds rows in index order at any thread count", "[kernels]") {
  Generator gen(5);
  const int64_t n = 700, D = 100, rows = 9;
  const Tensor gy = Tensor::randn({n, D}, gen);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = (i * 7 + i / 3) % rows;
  const Tensor idx = Tensor::from_vector(ids, {n});
  std::vector<float> want(static_cast<size_t>(rows * D), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < D; ++c) want[size_t(ids[size_t(i)] * D + c)] += gy.data<float>()[i * D + c];
  const int saved = omp_get_max_threads();
  for (const int threads : {1, 2, 3}) {
    INFO(threads << " threads");
    omp_set_num_threads(threads);
    const Tensor got = k::embedding_backward(gy, idx, rows);
    REQUIRE(got.shape() == Shape{rows, D});
    int64_t differ = 0;
    for (int64_t e = 0; e < rows * D; ++e) differ += got.data<float>()[e] != want[size_t(e)];
    CHECK(differ == 0);
  }
  omp_set_num_threads(saved);
}

TEST_CASE("kernels: index_select and index_add", "[kernels]") {
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {3, 2});
  require_values(k::index_select(x, 0, i64({2, 0, 2}, {3})), {3, 2}, {5, 6, 1, 2, 5, 6});
  require_values(k::index_select(x, -1, i64({1, 1, 0}, {3})), {3, 3}, {2, 2, 1, 4, 4, 3, 6, 6, 5});
  require_values(k::index_select(x.transpose(0, 1), 1, i64({2, 0}, {2})), {2, 2}, {5, 1, 6, 2});
  require_values(k::index_add({3, 2}, 0, i64({2, 0, 2}, {3}), f64({1, 1, 2, 2, 3, 3}, {3, 2})), {3, 2},
                 {2, 2, 0, 0, 4, 4});
  require_values(k::index_add({2, 3}, 1, i64({1, 1}, {2}), f64({1, 2, 3, 4}, {2, 2})), {2, 3}, {0, 3, 0, 0, 7, 0});
}

TEST_CASE("kernels: gather and scatter_add", "[kernels]") {
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  require_values(k::gather(x, 1, i64({2, 0, 1, 1}, {2, 2})), {2, 2}, {3, 1, 5, 5});
  require_values(k::gather(x, 0, i64({1, 0, 1}, {1, 3})), {1, 3}, {4, 2, 6});
  require_values(k::gather(x, -1, i64({0, 2}, {1, 2})), {1, 2}, {1, 3});
  // gather from a transposed view: xt = [[1,4],[2,5],[3,6]]
  require_values(k::gather(x.transpose(0, 1), 1, i64({1, 0, 1}, {3, 1})), {3, 1}, {4, 2, 6});
  require_values(k::scatter_add({2, 3}, 1, i64({2, 0, 1, 1}, {2, 2}), f64({1, 2, 3, 4}, {2, 2})), {2, 3},
                 {2, 0, 1, 0, 7, 0});
  require_values(k::scatter_add({2, 3}, 0, i64({1, 1, 0}, {1, 3}), f64({1, 2, 3}, {1, 3})), {2, 3},
                 {0, 0, 3, 1, 2, 0});
}

// ============================================================== cat / split

TEST_CASE("kernels: cat and split", "[kernels]") {
  Tensor a = f64({1, 2, 3, 4}, {2, 2}), b = f64({5, 6}, {1, 2}), c = f64({7, 8}, {2, 1});
  require_values(k::cat({a, b}, 0), {3, 2}, {1, 2, 3, 4, 5, 6});
  require_values(k::cat({a, c, a}, -1), {2, 5}, {1, 2, 7, 1, 2, 3, 4, 8, 3, 4});
  require_values(k::cat({a.transpose(0, 1), b}, 0), {3, 2}, {1, 3, 2, 4, 5, 6});
  Tensor x = iota({2, 5});
  std::vector<Tensor> parts = k::split(x, {2, 0, 3}, 1);
  REQUIRE(parts.size() == 3);
  require_values(parts[0], {2, 2}, {0, 1, 5, 6});
  REQUIRE(parts[1].shape() == Shape{2, 0});
  require_values(parts[2], {2, 3}, {2, 3, 4, 7, 8, 9});
  for (const Tensor& p : parts) REQUIRE(p.shares_storage(x));  // views
  std::vector<Tensor> rows = k::split(x, {1, 1}, -2);
  require_values(rows[1], {1, 5}, {5, 6, 7, 8, 9});
  REQUIRE_THROWS_WITH(k::split(x, {2, 2}, 1), Contains("4") && Contains("[2, 5]"));
  REQUIRE_THROWS_WITH(k::cat({a, f64({1, 2, 3}, {1, 3})}, 0), Contains("[1, 3]") && Contains("[2, 2]"));
}

// ============================================================== cross-entropy

TEST_CASE("kernels: cross_entropy with ignore_index, mean/sum/none, and its backward", "[kernels]") {
  // Row 0: logits [0, ln2, 0], lse ln4, target 1 -> ln2. Row 1 ignored. Row 2: zeros, target 2 -> ln3.
  const double ln2 = std::log(2.0), ln3 = std::log(3.0), ln4 = std::log(4.0);
  Tensor logits = f64({0, ln2, 0, 5, 5, 5, 0, 0, 0}, {3, 3});
  Tensor target = i64({1, -100, 2}, {3});
  k::CrossEntropyOut mean = k::cross_entropy(logits, target, -100, k::Reduction::Mean);
  require_values(mean.loss, {}, {(ln2 + ln3) / 2});
  REQUIRE(mean.count == 2);
  require_values(mean.lse, {3}, {ln4, 5 + ln3, ln3});
  require_values(k::cross_entropy(logits, target, -100, k::Reduction::Sum).loss, {}, {ln2 + ln3});
  require_values(k::cross_entropy(logits, target, -100, k::Reduction::None).loss, {3}, {ln2, 0, ln3});
  // custom ignore_index; transposed logits
  Tensor t2 = i64({-1, 0, 2}, {3});
  k::CrossEntropyOut o2 = k::cross_entropy(logits, t2, -1, k::Reduction::Mean);
  REQUIRE(o2.count == 2);
  require_values(o2.loss, {}, {(ln3 + ln3) / 2});
  Tensor lt = f64({0, 5, 0, ln2, 5, 0, 0, 5, 0}, {3, 3}).transpose(0, 1);
  require_values(k::cross_entropy(lt, target, -100, k::Reduction::None).loss, {3}, {ln2, 0, ln3});
  // backward: mean divides by the count of kept rows; ignored rows get 0
  Tensor d = k::cross_entropy_backward(Tensor::scalar(1.0, DType::F64), logits, mean.lse, target, -100,
                                       k::Reduction::Mean, mean.count);
  require_values(d, {3, 3}, {0.125, -0.25, 0.125, 0, 0, 0, 1.0 / 6, 1.0 / 6, -1.0 / 3});
  Tensor dn = k::cross_entropy_backward(f64({2, 7, -1}, {3}), logits, mean.lse, target, -100, k::Reduction::None,
                                        mean.count);
  require_values(dn, {3, 3}, {0.5, -1, 0.5, 0, 0, 0, -1.0 / 3, -1.0 / 3, 2.0 / 3});
  // all rows ignored: mean is 0, not NaN
  require_values(k::cross_entropy(logits, i64({-100, -100, -100}, {3}), -100, k::Reduction::Mean).loss, {}, {0});
  // float32
  require_values(k::cross_entropy(logits.to(DType::F32), target, -100, k::Reduction::Sum).loss, {}, {ln2 + ln3}, 1e-6);
}

// ============================================================== dropout

TEST_CASE("kernels: dropout mask statistics and reproducibility for a fixed seed", "[kernels]") {
  const double p = 0.3;
  Generator g(1234);
  Tensor m = k::dropout_mask({100, 100}, p, g, DType::F64);
  std::vector<double> v = m.to_vector<double>();
  int64_t zeros = 0;
  double total = 0;
  for (double e : v) {
    REQUIRE((e == 0.0 || e == 1.0 / (1.0 - p)));
    zeros += e == 0.0;
    total += e;
  }
  // 10000 Bernoulli(0.3) draws: std of the dropped fraction is ~0.0046
  REQUIRE(std::abs(double(zeros) / 1e4 - p) < 0.02);
  REQUIRE(std::abs(total / 1e4 - 1.0) < 0.03);
  // same seed -> same mask; the generator advances, so the next mask differs
  Generator g2(1234);
  REQUIRE(k::dropout_mask({100, 100}, p, g2, DType::F64).to_vector<double>() == v);
  REQUIRE(k::dropout_mask({100, 100}, p, g2, DType::F64).to_vector<double>() != v);
  Generator g3(99);
  REQUIRE(k::dropout_mask({100, 100}, p, g3, DType::F64).to_vector<double>() != v);
  // restoring the generator state replays the mask
  Generator g4(7);
  GeneratorState s = g4.state();
  std::vector<double> first = k::dropout_mask({50}, 0.5, g4, DType::F64).to_vector<double>();
  g4.set_state(s);
  REQUIRE(k::dropout_mask({50}, 0.5, g4, DType::F64).to_vector<double>() == first);
  // float32 masks, p = 0 keeps everything
  Generator g5(3);
  Tensor mf = k::dropout_mask({8}, 0.5, g5, DType::F32);
  REQUIRE(mf.dtype() == DType::F32);
  for (float e : mf.to_vector<float>()) REQUIRE((e == 0.0f || e == 2.0f));
  require_values(k::dropout_mask({4}, 0.0, g5, DType::F64), {4}, {1, 1, 1, 1});
  REQUIRE_THROWS_WITH(k::dropout_mask({4}, 1.0, g5, DType::F64), Contains("p must be in [0, 1)"));
  // autograd dropout: y = x * mask from the same generator state
  Generator ga(21), gb(21);
  Tensor x = iota({4, 5});
  Tensor y = dropout(Variable(x), 0.5, true, ga).data();
  require_values(y, {4, 5}, k::mul(x, k::dropout_mask({4, 5}, 0.5, gb, DType::F64)).to_vector<double>());
  REQUIRE(dropout(Variable(x), 0.5, false, ga).data().shares_storage(x));  // eval: identity
}

// ============================================================== autograd forwards

TEST_CASE("kernels: autograd ops and operators forward the hand-computed values", "[kernels][autograd]") {
  // A wrong forward with a matching backward would pass every gradcheck, so check values.
  Variable x(f64({1, 2, 4, 8}, {2, 2})), y(f64({2, -1}, {2}));
  require_values((x + 1.5).data(), {2, 2}, {2.5, 3.5, 5.5, 9.5});
  require_values((x - 0.5).data(), {2, 2}, {0.5, 1.5, 3.5, 7.5});
  require_values((x * 3.0).data(), {2, 2}, {3, 6, 12, 24});
  require_values((3.0 * x).data(), {2, 2}, {3, 6, 12, 24});
  require_values((x / 4.0).data(), {2, 2}, {0.25, 0.5, 1, 2});
  require_values((-x).data(), {2, 2}, {-1, -2, -4, -8});
  require_values((x + y).data(), {2, 2}, {3, 1, 6, 7});
  require_values((x - y).data(), {2, 2}, {-1, 3, 2, 9});
  require_values((x * y).data(), {2, 2}, {2, -2, 8, -8});
  require_values((x / y).data(), {2, 2}, {0.5, -2, 2, -8});
  require_values(pow(x, y).data(), {2, 2}, {1, 0.5, 16, 0.125});
  require_values(pow(x, 0.5).data(), {2, 2}, {1, std::sqrt(2.0), 2, std::sqrt(8.0)});
  require_values(add(x, 1.0).data(), {2, 2}, {2, 3, 5, 9});
  require_values(mul(x, -1.0).data(), {2, 2}, {-1, -2, -4, -8});
  require_values(neg(y).data(), {2}, {-2, 1});
  require_values(exp(Variable(f64({0, std::log(3.0)}, {2}))).data(), {2}, {1, 3});
  require_values(log(x).data(), {2, 2}, {0, std::log(2.0), 2 * std::log(2.0), 3 * std::log(2.0)});
  require_values(sqrt(x).data(), {2, 2}, {1, std::sqrt(2.0), 2, std::sqrt(8.0)});
  require_values(rsqrt(x).data(), {2, 2}, {1, 1 / std::sqrt(2.0), 0.5, 1 / std::sqrt(8.0)});
  require_values(abs(y).data(), {2}, {2, 1});
  require_values(relu(y).data(), {2}, {2, 0});
  require_values(tanh(Variable(f64({std::log(2.0)}, {1}))).data(), {1}, {0.6});
  require_values(sigmoid(Variable(f64({std::log(3.0)}, {1}))).data(), {1}, {0.75});
  require_values(silu(Variable(f64({std::log(3.0)}, {1}))).data(), {1}, {0.75 * std::log(3.0)});
  require_values(clamp(x, 1.5, 5.0).data(), {2, 2}, {1.5, 2, 4, 5});
  require_values(where(i64({0, 1}, {2}), x, y).data(), {2, 2}, {2, 2, 2, 8});
  require_values(masked_fill(x, i64({1, 0}, {2, 1}), 7.0).data(), {2, 2}, {7, 7, 4, 8});
  // reductions
  require_values(sum(x).data(), {}, {15});
  require_values(sum(x, {0}, true).data(), {1, 2}, {5, 10});
  require_values(mean(x, {-1}).data(), {2}, {1.5, 6});
  require_values(max(x, {0}).data(), {2}, {4, 8});
  require_values(logsumexp(Variable(f64({0, std::log(3.0)}, {1, 2})), {1}, true).data(), {1, 1}, {std::log(4.0)});
  require_values(var(x, {1}).data(), {2}, {0.5, 8});
  require_values(var(x, {}, false, 0).data(), {}, {(7.5625 + 3.0625 + 0.0625 + 18.0625) / 4});
  // linear algebra, softmax, norms, loss
  require_values(matmul(x, Variable(f64({1, 0, 1, 1}, {2, 2}))).data(), {2, 2}, {3, 2, 12, 8});
  require_values(softmax(Variable(f64({0, std::log(3.0)}, {2})), 0).data(), {2}, {0.25, 0.75});
  require_values(log_softmax(Variable(f64({0, std::log(3.0)}, {2})), 0).data(), {2}, {std::log(0.25), std::log(0.75)});
  require_values(cross_entropy(Variable(f64({0, std::log(3.0), 0, 0}, {2, 2})), i64({1, -100}, {2})).data(), {},
                 {std::log(4.0 / 3.0)});
  // indexing and shapes
  require_values(embedding(x, i64({1, 1, 0}, {3})).data(), {3, 2}, {4, 8, 4, 8, 1, 2});
  require_values(index_select(x, 1, i64({1, 0}, {2})).data(), {2, 2}, {2, 1, 8, 4});
  require_values(gather(x, 1, i64({1, 0}, {2, 1})).data(), {2, 1}, {2, 4});
  require_values(reshape(x, {4}).data(), {4}, {1, 2, 4, 8});
  require_values(transpose(x, 0, 1).data(), {2, 2}, {1, 4, 2, 8});
  require_values(permute(Variable(iota({2, 1, 3})), {2, 0, 1}).data(), {3, 2, 1}, {0, 3, 1, 4, 2, 5});
  require_values(narrow(x, 1, 1, 1).data(), {2, 1}, {2, 8});
  require_values(select(x, 0, -1).data(), {2}, {4, 8});
  require_values(expand(y, {2, 2}).data(), {2, 2}, {2, -1, 2, -1});
  require_values(unsqueeze(y, 0).data(), {1, 2}, {2, -1});
  require_values(squeeze(Variable(f64({5, 6}, {2, 1})), -1).data(), {2}, {5, 6});
  require_values(contiguous(transpose(x, 0, 1)).data(), {2, 2}, {1, 4, 2, 8});
  require_values(cat({x, unsqueeze(y, 0)}, 0).data(), {3, 2}, {1, 2, 4, 8, 2, -1});
  std::vector<Variable> parts = split(Variable(iota({5})), {3, 2}, 0);
  require_values(parts[0].data(), {3}, {0, 1, 2});
  require_values(parts[1].data(), {2}, {3, 4});
}

// ============================================================== errors

TEST_CASE("kernels: shape mismatches name both shapes", "[kernels][errors]") {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4, 5});
  const ContainsAll both({"[2, 3]", "[4, 5]"});
  REQUIRE_THROWS_WITH(k::add(a, b), both);
  REQUIRE_THROWS_WITH(k::binary(k::Binary::Lt, a, b), both);
  REQUIRE_THROWS_WITH(k::matmul(a, b), both);
  REQUIRE_THROWS_WITH(k::where(Tensor::ones({2, 3}), a, b), both);
  REQUIRE_THROWS_WITH(k::cat({a, b}, 0), both);
  REQUIRE_THROWS_WITH(k::softmax_backward(a, b, -1), both);
  REQUIRE_THROWS_WITH(k::add_(a, b), both);
  REQUIRE_THROWS_WITH(k::layer_norm(a, Tensor::ones({4}), Tensor(), 1e-5), Contains("[4]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(k::rms_norm(a, Tensor::ones({5}), 1e-5), Contains("[5]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(k::cross_entropy(a, i64({0, 1, 2}, {3}), -100, k::Reduction::Mean),
                      Contains("[3]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(k::gather(a, 1, i64({0, 0, 0, 0, 0, 0, 0, 0}, {4, 2})), Contains("[4, 2]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(k::scatter_add({2, 3}, 1, i64({0, 0}, {2, 1}), Tensor::ones({2, 2}, DType::F32)),
                      Contains("[2, 2]") && Contains("[2, 1]"));
  // autograd ops report the same
  REQUIRE_THROWS_WITH(add(Variable(a, true), Variable(b, true)), both);
  REQUIRE_THROWS_WITH(matmul(Variable(a, true), Variable(b, true)), both);
  REQUIRE_THROWS_WITH(a.view({4, 5}), Contains("[2, 3]") && Contains("[4, 5]"));
}

TEST_CASE("kernels: dtype mismatches name both dtypes", "[kernels][errors]") {
  Tensor a = Tensor::zeros({2, 3}, DType::F32), b = Tensor::zeros({2, 3}, DType::F64);
  const ContainsAll both({"float32", "float64"});
  REQUIRE_THROWS_WITH(k::add(a, b), both);
  REQUIRE_THROWS_WITH(k::binary(k::Binary::Eq, a, b), both);
  REQUIRE_THROWS_WITH(k::matmul(a, b.transpose(0, 1)), both);
  REQUIRE_THROWS_WITH(k::where(a, a, b), both);
  REQUIRE_THROWS_WITH(k::cat({a, b}, 0), both);
  REQUIRE_THROWS_WITH(k::layer_norm(a, Tensor::ones({3}, DType::F64), Tensor(), 1e-5), both);
  REQUIRE_THROWS_WITH(k::add_(a, b), both);
  REQUIRE_THROWS_WITH(mul(Variable(a, true), Variable(b, true)), both);
  const ContainsAll mixed_int({"float32", "int64"});
  REQUIRE_THROWS_WITH(k::sub(a, Tensor::zeros({2, 3}, DType::I64)), mixed_int);
}

TEST_CASE("kernels: out-of-range indices name the index", "[kernels][errors]") {
  Tensor w = Tensor::zeros({4, 2});
  REQUIRE_THROWS_WITH(k::embedding(w, i64({1, 7}, {2})), Contains("index 7") && Contains("4"));
  REQUIRE_THROWS_WITH(k::embedding(w, i64({-1}, {1})), Contains("index -1"));
  REQUIRE_THROWS_WITH(k::embedding_backward(Tensor::zeros({1, 2}), i64({9}, {1}), 4), Contains("index 9"));
  REQUIRE_THROWS_WITH(k::index_select(w, 1, i64({0, 2}, {2})), Contains("index 2"));
  REQUIRE_THROWS_WITH(k::index_select(w, 0, i64({-3}, {1})), Contains("index -3"));
  REQUIRE_THROWS_WITH(k::index_add({4, 2}, 0, i64({5}, {1}), Tensor::zeros({1, 2})), Contains("index 5"));
  REQUIRE_THROWS_WITH(k::gather(w, 1, i64({0, 3}, {1, 2})), Contains("index 3"));
  REQUIRE_THROWS_WITH(k::gather(w, 0, i64({-2, 0}, {1, 2})), Contains("index -2"));
  REQUIRE_THROWS_WITH(k::scatter_add({4, 2}, 0, i64({6, 0}, {1, 2}), Tensor::zeros({1, 2})), Contains("index 6"));
  REQUIRE_THROWS_WITH(k::cross_entropy(w, i64({0, 1, 2, 0}, {4}), -100, k::Reduction::Mean), Contains("target 2"));
  REQUIRE_THROWS_WITH(k::cross_entropy(w, i64({0, -5, 1, 0}, {4}), -100, k::Reduction::Mean), Contains("target -5"));
  REQUIRE_THROWS_WITH(embedding(Variable(w, true), i64({11}, {1})), Contains("index 11"));
  REQUIRE_THROWS_WITH(w.select(0, 4), Contains("index 4"));
  REQUIRE_THROWS_WITH(w.at({0, 2}), Contains("index 2"));
}

TEST_CASE("kernels: int64 input to a float op throws naming the dtype", "[kernels][errors]") {
  Tensor x = i64({1, 2, 3, 4}, {2, 2});
  REQUIRE_THROWS_WITH(k::unary(k::Unary::Exp, x), Contains("int64"));
  REQUIRE_THROWS_WITH(k::reduce(k::Reduce::Mean, x, {}, false), Contains("int64"));
  REQUIRE_THROWS_WITH(k::softmax(x, -1), Contains("int64"));
  REQUIRE_THROWS_WITH(k::log_softmax(x, 0), Contains("int64"));
  REQUIRE_THROWS_WITH(k::matmul(x, x), Contains("int64"));
  REQUIRE_THROWS_WITH(k::layer_norm(x, Tensor(), Tensor(), 1e-5), Contains("int64"));
  REQUIRE_THROWS_WITH(k::rms_norm(x, Tensor(), 1e-5), Contains("int64"));
  REQUIRE_THROWS_WITH(k::embedding(x, i64({0}, {1})), Contains("int64"));
  REQUIRE_THROWS_WITH(k::cross_entropy(x, i64({0, 1}, {2}), -100, k::Reduction::Mean), Contains("int64"));
  REQUIRE_THROWS_WITH(k::dropout_mask({2}, 0.5, default_generator(), DType::I64), Contains("int64"));
  REQUIRE_THROWS_WITH(Variable(x, true), Contains("int64"));
  // float indices are rejected the other way round
  REQUIRE_THROWS_WITH(k::embedding(Tensor::zeros({3, 2}), Tensor::zeros({2})), Contains("float32"));
  REQUIRE_THROWS_WITH(k::cross_entropy(Tensor::zeros({2, 3}), Tensor::zeros({2}), -100, k::Reduction::Mean),
                      Contains("float32"));
}

TEST_CASE("kernels: ops that index a dim reject 0-d tensors instead of reading past the shape", "[kernels][errors]") {
  // A 0-d tensor has no dim to index; reductions and softmax still accept dim 0 / -1.
  Tensor s = Tensor::scalar(2.0, DType::F64);
  const ContainsAll zero_d({"0-d"});
  REQUIRE_THROWS_WITH(s.size(0), zero_d);
  REQUIRE_THROWS_WITH(s.size(-1), zero_d);
  REQUIRE_THROWS_WITH(s.narrow(0, 0, 1), zero_d);
  REQUIRE_THROWS_WITH(s.slice(0, 0, 1), zero_d);
  REQUIRE_THROWS_WITH(s.select(0, 0), zero_d);
  REQUIRE_THROWS_WITH(s.squeeze(0), zero_d);
  REQUIRE_THROWS_WITH(s.transpose(0, -1), zero_d);
  REQUIRE_THROWS_WITH(k::cat({s, s}, 0), zero_d);
  REQUIRE_THROWS_WITH(k::split(s, {1}, 0), zero_d);
  REQUIRE_THROWS_WITH(k::index_select(s, 0, i64({0}, {1})), zero_d);
  REQUIRE_THROWS_WITH(k::gather(s, 0, Tensor::scalar(0, DType::I64)), zero_d);
  REQUIRE_THROWS_WITH(k::index_add({}, 0, i64({0}, {1}), s), zero_d);
  REQUIRE_THROWS_WITH(k::scatter_add({}, 0, Tensor::scalar(0, DType::I64), s), zero_d);
  REQUIRE_THROWS_WITH(cat({Variable(s, true), Variable(s, true)}, 0), zero_d);
  REQUIRE_THROWS_WITH(embedding(Variable(s, true), i64({0}, {1})), zero_d);
  // still fine on 0-d: reductions and softmax over dim 0 / -1, unsqueeze, squeeze()
  require_values(k::sum(s, {0}), {}, {2});
  require_values(k::reduce(k::Reduce::Max, s, {-1}, true), {}, {2});
  require_values(k::softmax(s, -1), {}, {1});
  require_values(s.unsqueeze(0), {1}, {2});
  require_values(s.squeeze(), {}, {2});
  require_values(sum(Variable(s), {0}, true).data(), {}, {2});
  require_values(mean(Variable(s), {-1}).data(), {}, {2});
}

TEST_CASE("kernels: integer division by zero throws instead of trapping", "[kernels][errors]") {
  require_values(k::div(i64({7, -7, 9}, {3}), i64({2, 2, -3}, {3})), {3}, {3, -3, -3});  // truncates
  REQUIRE_THROWS_WITH(k::div(i64({1, 2}, {2}), i64({1, 0}, {2})), Contains("division by zero"));
  REQUIRE_THROWS_WITH(k::div(i64({1, 2, 3, 4}, {2, 2}), Tensor::zeros({1}, DType::I64)), Contains("division by zero"));
  REQUIRE_THROWS_WITH(k::div(i64({std::numeric_limits<int64_t>::min()}, {1}), i64({-1}, {1})), Contains("overflow"));
  // floating division by zero is IEEE: inf / nan, no error
  std::vector<double> v = k::div(f64({1, -1, 0}, {3}), f64({0}, {1})).to_vector<double>();
  REQUIRE(v[0] == kInf);
  REQUIRE(v[1] == -kInf);
  REQUIRE(std::isnan(v[2]));
}

TEST_CASE("kernels: cuda tensors throw without a GPU", "[kernels][errors]") {
  if (cuda::available()) {
    // With a GPU the tensor exists, but CPU-only ops refuse it by name.
    Tensor t = Tensor::zeros({2}, DType::F32, Device::CUDA);
    REQUIRE_THROWS_WITH(k::unary(k::Unary::Exp, t), Contains("no CUDA kernel"));
    REQUIRE_THROWS_WITH(k::add(t, t), Contains("no CUDA kernel"));
    return;
  }
  const ContainsAll no_cuda({"no CUDA device", "built without CUDA support"}, /*any=*/true);
  REQUIRE_THROWS_WITH(Tensor::zeros({2}, DType::F32, Device::CUDA), no_cuda);
  REQUIRE_THROWS_WITH(Tensor::ones({2, 3}, DType::F64, Device::CUDA), no_cuda);
  REQUIRE_THROWS_WITH(Tensor::empty({4}, DType::I64, Device::CUDA), no_cuda);
  REQUIRE_THROWS_WITH(Tensor::zeros({2}).to(Device::CUDA), no_cuda);
}
