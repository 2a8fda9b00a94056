// tests/autograd/test_gradcheck_ops.cpp — float64 central-difference gradchecks for every
// differentiable op of autograd/ops.h: broadcasting, non-contiguous inputs (views passed
// into the op and leaves whose data is itself a view), multi-dim reductions with and without
// keepdim, negative dims, and non-contiguous / broadcast upstream gradients.
// Inputs stay away from kinks (abs/relu/clamp/max ties) and from the edges of the domain
// (log/sqrt/rsqrt/pow: positive inputs). Each check is small so the file runs in seconds.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "../helpers.h"

using namespace relpos;
using relpos::test::rand_var;
using relpos::test::require_gradcheck;

namespace {

using Inputs = const std::vector<Variable>&;

Tensor ids(const std::vector<int64_t>& v, const Shape& s) { return Tensor::from_vector(v, s); }

// float64 leaf with magnitudes in [lo, hi) and random signs: non-uniform and away from 0.
Variable signed_var(const Shape& shape, uint64_t seed, double lo = 0.2, double hi = 1.5) {
  Generator g(seed);
  Tensor t = Tensor::empty(shape, DType::F64);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    double m = lo + (hi - lo) * g.uniform();
    p[i] = g.uniform() < 0.5 ? -m : m;
  }
  return Variable(t, true);
}

// A leaf of shape [rows, cols] whose data is the transpose of a contiguous [cols, rows].
Variable transposed_leaf(int64_t rows, int64_t cols, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Generator g(seed);
  Tensor t = Tensor::rand({cols, rows}, g, DType::F64, lo, hi).transpose(0, 1);
  REQUIRE_FALSE(t.is_contiguous());
  return Variable(t, true);
}

// A leaf of `shape` whose data is a narrowed view (offset, padded last dim) of a larger
// tensor; a 1-d one is every other element (stride 2) of a larger vector.
Variable narrowed_leaf(Shape shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Generator g(seed);
  const int64_t n = shape.back();
  Shape big = shape;
  big.back() = shape.size() == 1 ? 2 * n + 1 : n + 3;
  Tensor b = Tensor::rand(big, g, DType::F64, lo, hi);
  Tensor t = shape.size() == 1 ? b.slice(0, 1, 2 * n + 1, 2) : b.narrow(-1, 1, n);
  REQUIRE_FALSE(t.is_contiguous());
  return Variable(t, true);
}

}  // namespace

// ============================================================== the harness itself

TEST_CASE("gradcheck: the harness flags a wrong backward and names the worst element", "[gradcheck]") {
  // y = x^2 with a backward that forgets the factor 2 at one element.
  auto bad_square = [](Inputs v) {
    Tensor x = v[0].data();
    return make_result(k::mul(x, x), "bad_square", {v[0]}, [x](const Tensor& g) -> std::vector<Tensor> {
      Tensor d = k::unary(k::Unary::MulScalar, x, 2.0);
      d.narrow(0, 1, 1).narrow(1, 2, 1).fill_(0.0);  // wrong derivative at [1, 2]
      return {k::mul(g, d)};
    });
  };
  Variable x = transposed_leaf(3, 4, 999, 0.5, 1.5);
  GradcheckReport r = gradcheck("bad_square", bad_square, {x});
  INFO(r.str());
  REQUIRE_FALSE(r.ok);
  REQUIRE(r.input == 0);
  REQUIRE(r.index == std::vector<int64_t>{1, 2});
  REQUIRE(r.elements == 12);
  REQUIRE(r.analytic == 0.0);
  // The correct op passes on the same (non-contiguous) leaf.
  require_gradcheck("square", [](Inputs v) { return mul(v[0], v[0]); }, {x});
}

// ============================================================== binary elementwise

TEST_CASE("gradcheck: add with broadcasting [3,1,4] + [2,4]", "[gradcheck]") {
  require_gradcheck("add", [](Inputs v) { return add(v[0], v[1]); },
                    {rand_var({3, 1, 4}, 1), rand_var({2, 4}, 2)});
  require_gradcheck("add scalar-shaped", [](Inputs v) { return add(v[0], v[1]); },
                    {rand_var({2, 3}, 3), rand_var({}, 4)});
}

TEST_CASE("gradcheck: add of a transposed view and a transposed leaf", "[gradcheck]") {
  Variable a = transposed_leaf(3, 4, 5);
  Variable b = rand_var({4, 3}, 6);
  require_gradcheck("add transposed", [](Inputs v) { return add(v[0], transpose(v[1], 0, 1)); }, {a, b});
}

TEST_CASE("gradcheck: sub with broadcasting and sliced views", "[gradcheck]") {
  require_gradcheck("sub", [](Inputs v) { return sub(v[0], v[1]); },
                    {rand_var({3, 1}, 7), rand_var({1, 4}, 8)});
  require_gradcheck("sub narrowed", [](Inputs v) { return sub(narrow(v[0], 1, 1, 3), v[1]); },
                    {rand_var({2, 5}, 9), narrowed_leaf({3}, 10)});
}

TEST_CASE("gradcheck: mul with broadcasting and with itself", "[gradcheck]") {
  require_gradcheck("mul", [](Inputs v) { return mul(v[0], v[1]); },
                    {rand_var({2, 3, 1}, 11), rand_var({1, 4}, 12)});
  require_gradcheck("mul self", [](Inputs v) { return mul(v[0], v[0]); }, {rand_var({3, 4}, 13)});
  require_gradcheck("mul transposed leaf", [](Inputs v) { return mul(v[0], v[1]); },
                    {transposed_leaf(4, 3, 14), rand_var({3}, 15)});
}

TEST_CASE("gradcheck: div with broadcasting, denominator away from zero", "[gradcheck]") {
  require_gradcheck("div", [](Inputs v) { return div(v[0], v[1]); },
                    {rand_var({3, 1, 4}, 16), rand_var({2, 4}, 17, 0.5, 2.0)});
  require_gradcheck("div negative denominators", [](Inputs v) { return div(v[0], v[1]); },
                    {rand_var({4}, 18), signed_var({3, 4}, 19, 0.5, 2.0)});
}

TEST_CASE("gradcheck: pow with a tensor exponent and broadcasting", "[gradcheck]") {
  require_gradcheck("pow tensor", [](Inputs v) { return pow(v[0], v[1]); },
                    {rand_var({2, 3}, 20, 0.5, 2.0), rand_var({3}, 21, -1.5, 1.5)});
  require_gradcheck("pow tensor broadcast base", [](Inputs v) { return pow(v[0], v[1]); },
                    {rand_var({3, 1}, 22, 0.5, 2.0), rand_var({1, 4}, 23, -1.5, 2.5)});
}

TEST_CASE("gradcheck: pow with scalar exponents", "[gradcheck]") {
  for (double p : {2.0, 3.0, 0.5, -1.5, 1.7}) {
    INFO("exponent " << p);
    require_gradcheck("pow scalar", [p](Inputs v) { return pow(v[0], p); },
                      {rand_var({3, 4}, 24, 0.3, 2.0)});
  }
  // Integer exponents are fine for negative bases.
  require_gradcheck("pow scalar 3 negative base", [](Inputs v) { return pow(v[0], 3.0); },
                    {signed_var({2, 3}, 25)});
}

TEST_CASE("gradcheck: add and mul with a scalar, and the scalar operators", "[gradcheck]") {
  require_gradcheck("add scalar", [](Inputs v) { return add(v[0], 2.5); }, {rand_var({3, 4}, 26)});
  require_gradcheck("mul scalar", [](Inputs v) { return mul(v[0], -1.75); }, {rand_var({3, 4}, 27)});
  require_gradcheck("operators",
                    [](Inputs v) { return ((v[0] + 1.5) * 2.0 - v[1] / 4.0) * (0.5 * v[1]) - (-v[0]) + (v[0] - 0.25); },
                    {rand_var({2, 3}, 28), rand_var({3}, 29)});
  require_gradcheck("binary operators", [](Inputs v) { return (v[0] + v[1]) * v[0] - v[1] / (v[0] + 3.0); },
                    {rand_var({2, 3}, 30), rand_var({2, 1}, 31)});
}

TEST_CASE("gradcheck: neg", "[gradcheck]") {
  require_gradcheck("neg", [](Inputs v) { return neg(v[0]); }, {rand_var({2, 5}, 32)});
}

// ============================================================== unary elementwise

TEST_CASE("gradcheck: exp", "[gradcheck]") {
  require_gradcheck("exp", [](Inputs v) { return exp(v[0]); }, {rand_var({3, 4}, 33, -2.0, 1.5)});
}

TEST_CASE("gradcheck: log on positive inputs", "[gradcheck]") {
  require_gradcheck("log", [](Inputs v) { return log(v[0]); }, {rand_var({3, 4}, 34, 0.3, 3.0)});
}

TEST_CASE("gradcheck: sqrt on positive inputs", "[gradcheck]") {
  require_gradcheck("sqrt", [](Inputs v) { return sqrt(v[0]); }, {rand_var({3, 4}, 35, 0.3, 3.0)});
}

TEST_CASE("gradcheck: rsqrt on positive inputs", "[gradcheck]") {
  require_gradcheck("rsqrt", [](Inputs v) { return rsqrt(v[0]); }, {rand_var({3, 4}, 36, 0.3, 3.0)});
}

TEST_CASE("gradcheck: abs away from zero", "[gradcheck]") {
  require_gradcheck("abs", [](Inputs v) { return abs(v[0]); }, {signed_var({3, 4}, 37)});
}

TEST_CASE("gradcheck: tanh", "[gradcheck]") {
  require_gradcheck("tanh", [](Inputs v) { return tanh(v[0]); }, {rand_var({3, 4}, 38, -2.0, 2.0)});
}

TEST_CASE("gradcheck: sigmoid", "[gradcheck]") {
  require_gradcheck("sigmoid", [](Inputs v) { return sigmoid(v[0]); }, {rand_var({3, 4}, 39, -3.0, 3.0)});
}

TEST_CASE("gradcheck: relu away from zero", "[gradcheck]") {
  require_gradcheck("relu", [](Inputs v) { return relu(v[0]); }, {signed_var({3, 4}, 40)});
}

TEST_CASE("gradcheck: gelu (erf)", "[gradcheck]") {
  require_gradcheck("gelu erf", [](Inputs v) { return gelu(v[0], GeluApprox::Erf); },
                    {rand_var({3, 4}, 41, -3.0, 3.0)});
}

TEST_CASE("gradcheck: gelu (tanh approximation)", "[gradcheck]") {
  require_gradcheck("gelu tanh", [](Inputs v) { return gelu(v[0], GeluApprox::Tanh); },
                    {rand_var({3, 4}, 42, -3.0, 3.0)});
}

TEST_CASE("gradcheck: silu", "[gradcheck]") {
  require_gradcheck("silu", [](Inputs v) { return silu(v[0]); }, {rand_var({3, 4}, 43, -3.0, 3.0)});
}

TEST_CASE("gradcheck: clamp with values inside and outside the bounds", "[gradcheck]") {
  // Magnitudes in [0.1, 1.5): some below -0.6, some above 0.7, none within 1e-3 of a bound.
  Variable x = signed_var({4, 5}, 44, 0.1, 1.5);
  for (double e : x.data().to_vector<double>()) {
    REQUIRE(std::abs(e + 0.6) > 1e-3);
    REQUIRE(std::abs(e - 0.7) > 1e-3);
  }
  require_gradcheck("clamp", [](Inputs v) { return clamp(v[0], -0.6, 0.7); }, {x});
}

TEST_CASE("gradcheck: unary ops on a transposed leaf and on sliced views", "[gradcheck]") {
  Variable xt = transposed_leaf(3, 4, 45, 0.3, 2.0);
  require_gradcheck("unary chain transposed",
                    [](Inputs v) {
                      Variable x = v[0];
                      return add(add(mul(log(x), sqrt(x)), mul(rsqrt(x), tanh(x))),
                                 add(mul(sigmoid(x), exp(x)), mul(gelu(x), silu(x))));
                    },
                    {xt});
  Variable xs = signed_var({4, 6}, 46);
  require_gradcheck("unary on a narrowed view",
                    [](Inputs v) {
                      Variable s = narrow(v[0], 1, 2, 3);
                      return add(mul(abs(s), relu(s)), gelu(s, GeluApprox::Tanh));
                    },
                    {xs});
  require_gradcheck("unary on a narrowed leaf",
                    [](Inputs v) { return mul(abs(v[0]), relu(neg(v[0]))); }, {narrowed_leaf({3, 4}, 47)});
}

// ============================================================== selection

TEST_CASE("gradcheck: where with broadcast condition and operands", "[gradcheck]") {
  Tensor cond = ids({1, 0, 1}, {3, 1});  // int64 condition
  require_gradcheck("where", [cond](Inputs v) { return where(cond, v[0], v[1]); },
                    {rand_var({3, 4}, 48), rand_var({4}, 49)});
  Tensor cond2 = Tensor::from_vector<double>({1, 0, 0, 1, 1, 0, 1, 0}, {2, 4});
  require_gradcheck("where broadcast both", [cond2](Inputs v) { return where(cond2, v[0], v[1]); },
                    {rand_var({3, 1, 4}, 50), transposed_leaf(2, 4, 51)});
}

TEST_CASE("gradcheck: masked_fill with a broadcast mask", "[gradcheck]") {
  Tensor mask = ids({0, 1, 0, 1}, {1, 4});
  require_gradcheck("masked_fill", [mask](Inputs v) { return masked_fill(v[0], mask, 0.5); },
                    {rand_var({3, 4}, 52)});
  Tensor mask2 = Tensor::from_vector<double>({1, 0, 0}, {3, 1});
  require_gradcheck("masked_fill transposed view",
                    [mask2](Inputs v) { return masked_fill(transpose(v[0], 0, 1), mask2, -2.0); },
                    {rand_var({4, 3}, 53)});
}

// ============================================================== reductions

TEST_CASE("gradcheck: sum over all, one, several and negative dims", "[gradcheck]") {
  Variable x = rand_var({2, 3, 4}, 54);
  require_gradcheck("sum all", [](Inputs v) { return sum(v[0]); }, {x});
  require_gradcheck("sum all keepdim", [](Inputs v) { return sum(v[0], {}, true); }, {x});
  require_gradcheck("sum dim 1", [](Inputs v) { return sum(v[0], {1}); }, {x});
  require_gradcheck("sum dims 0,2 keepdim", [](Inputs v) { return sum(v[0], {0, 2}, true); }, {x});
  require_gradcheck("sum dims 0,2", [](Inputs v) { return sum(v[0], {2, 0}); }, {x});
  require_gradcheck("sum dim -1 keepdim", [](Inputs v) { return sum(v[0], {-1}, true); }, {x});
  require_gradcheck("sum dims -1,-3", [](Inputs v) { return sum(v[0], {-1, -3}); }, {x});
}

TEST_CASE("gradcheck: mean over all, one, several and negative dims", "[gradcheck]") {
  Variable x = rand_var({2, 3, 4}, 55);
  require_gradcheck("mean all", [](Inputs v) { return mean(v[0]); }, {x});
  require_gradcheck("mean dim 1", [](Inputs v) { return mean(v[0], {1}); }, {x});
  require_gradcheck("mean dims 0,2 keepdim", [](Inputs v) { return mean(v[0], {0, 2}, true); }, {x});
  require_gradcheck("mean dims -1,-2", [](Inputs v) { return mean(v[0], {-1, -2}); }, {x});
  require_gradcheck("mean dim -3 keepdim", [](Inputs v) { return mean(v[0], {-3}, true); }, {x});
}

TEST_CASE("gradcheck: max over all, one, several and negative dims (no ties)", "[gradcheck]") {
  Variable x = rand_var({2, 3, 4}, 56);
  require_gradcheck("max all", [](Inputs v) { return max(v[0]); }, {x});
  require_gradcheck("max dim 1", [](Inputs v) { return max(v[0], {1}); }, {x});
  require_gradcheck("max dims 0,2 keepdim", [](Inputs v) { return max(v[0], {0, 2}, true); }, {x});
  require_gradcheck("max dim -1", [](Inputs v) { return max(v[0], {-1}); }, {x});
  require_gradcheck("max dims -1,-3 keepdim", [](Inputs v) { return max(v[0], {-1, -3}, true); }, {x});
}

TEST_CASE("autograd: max splits the gradient evenly between tied maxima", "[autograd]") {
  Variable x(Tensor::from_vector<double>({1, 3, 3, 2, 5, 0, 5, 5}, {2, 4}), true);
  Variable y = max(x, {1});
  y.backward(Tensor::from_vector<double>({1.0, 6.0}, {2}));
  std::vector<double> expect = {0, 0.5, 0.5, 0, 2, 0, 2, 2};
  REQUIRE(x.grad().to_vector<double>() == expect);
}

TEST_CASE("gradcheck: logsumexp over one, several and negative dims", "[gradcheck]") {
  Variable x = rand_var({2, 3, 4}, 57, -2.0, 2.0);
  require_gradcheck("logsumexp dim 1", [](Inputs v) { return logsumexp(v[0], {1}); }, {x});
  require_gradcheck("logsumexp dims 0,2 keepdim", [](Inputs v) { return logsumexp(v[0], {0, 2}, true); }, {x});
  require_gradcheck("logsumexp dim -1", [](Inputs v) { return logsumexp(v[0], {-1}); }, {x});
  require_gradcheck("logsumexp all", [](Inputs v) { return logsumexp(v[0], {0, 1, 2}); }, {x});
}

TEST_CASE("gradcheck: var with corrections, several dims and keepdim", "[gradcheck]") {
  Variable x = rand_var({2, 3, 4}, 58);
  require_gradcheck("var all", [](Inputs v) { return var(v[0]); }, {x});
  require_gradcheck("var all correction 0", [](Inputs v) { return var(v[0], {}, false, 0); }, {x});
  require_gradcheck("var dim 1", [](Inputs v) { return var(v[0], {1}); }, {x});
  require_gradcheck("var dims 0,2 keepdim", [](Inputs v) { return var(v[0], {0, 2}, true); }, {x});
  require_gradcheck("var dim -1 correction 0", [](Inputs v) { return var(v[0], {-1}, false, 0); }, {x});
  require_gradcheck("var dims -1,-2 keepdim correction 2", [](Inputs v) { return var(v[0], {-1, -2}, true, 2); },
                    {x});
}

TEST_CASE("gradcheck: reductions and softmax of a 0-d input over dim 0 / -1", "[gradcheck]") {
  Variable s = rand_var({}, 161, 0.5, 1.5);
  require_gradcheck("sum 0-d dim 0", [](Inputs v) { return sum(v[0], {0}); }, {s});
  require_gradcheck("mean 0-d dim -1 keepdim", [](Inputs v) { return mean(v[0], {-1}, true); }, {s});
  require_gradcheck("max 0-d", [](Inputs v) { return max(v[0], {0}, true); }, {s});
  require_gradcheck("logsumexp 0-d", [](Inputs v) { return logsumexp(v[0], {-1}); }, {s});
  require_gradcheck("softmax 0-d times x", [](Inputs v) { return mul(log_softmax(v[0], 0), v[0]); }, {s});
  require_gradcheck("sum 0-d all", [](Inputs v) { return sum(mul(v[0], v[0])); }, {s});
}

TEST_CASE("gradcheck: reductions of permuted and transposed inputs", "[gradcheck]") {
  Variable x = rand_var({3, 2, 4}, 59);
  require_gradcheck("sum permuted", [](Inputs v) { return sum(permute(v[0], {2, 0, 1}), {0, 2}); }, {x});
  require_gradcheck("mean permuted keepdim", [](Inputs v) { return mean(permute(v[0], {1, 2, 0}), {-1}, true); },
                    {x});
  require_gradcheck("max permuted", [](Inputs v) { return max(permute(v[0], {2, 1, 0}), {1, 2}); }, {x});
  require_gradcheck("logsumexp permuted", [](Inputs v) { return logsumexp(permute(v[0], {2, 1, 0}), {0}); }, {x});
  require_gradcheck("var permuted", [](Inputs v) { return var(permute(v[0], {1, 0, 2}), {0, 2}); }, {x});
  Variable t = transposed_leaf(4, 5, 60);
  require_gradcheck("reductions of a transposed leaf",
                    [](Inputs v) {
                      return add(add(sum(v[0], {0}), mean(v[0], {0})),
                                 add(max(v[0], {0}), add(logsumexp(v[0], {0}), var(v[0], {0}))));
                    },
                    {t});
}

// ============================================================== matmul

TEST_CASE("gradcheck: matmul 2-D", "[gradcheck]") {
  require_gradcheck("matmul 2d", [](Inputs v) { return matmul(v[0], v[1]); },
                    {rand_var({3, 4}, 61), rand_var({4, 5}, 62)});
  require_gradcheck("matmul 2d vector-shaped", [](Inputs v) { return matmul(v[0], v[1]); },
                    {rand_var({1, 4}, 63), rand_var({4, 1}, 64)});
}

TEST_CASE("gradcheck: matmul with broadcast batch dims [2,1,3,4] @ [3,4,5]", "[gradcheck]") {
  require_gradcheck("matmul broadcast batch", [](Inputs v) { return matmul(v[0], v[1]); },
                    {rand_var({2, 1, 3, 4}, 65), rand_var({3, 4, 5}, 66)});
  require_gradcheck("matmul batch [2,3,4] @ [1,4,2]", [](Inputs v) { return matmul(v[0], v[1]); },
                    {rand_var({2, 3, 4}, 67), rand_var({1, 4, 2}, 68)});
}

TEST_CASE("gradcheck: matmul of batched inputs with a 2-D weight", "[gradcheck]") {
  require_gradcheck("matmul [2,3,4] @ [4,5]", [](Inputs v) { return matmul(v[0], v[1]); },
                    {rand_var({2, 3, 4}, 69), rand_var({4, 5}, 70)});
  require_gradcheck("matmul [2,1,3,4] @ [4,5]", [](Inputs v) { return matmul(v[0], v[1]); },
                    {rand_var({2, 1, 3, 4}, 71), rand_var({4, 5}, 72)});
  require_gradcheck("matmul [3,4] @ [2,4,5]", [](Inputs v) { return matmul(v[0], v[1]); },
                    {rand_var({3, 4}, 73), rand_var({2, 4, 5}, 74)});
}

TEST_CASE("gradcheck: linear with and without a bias, batched, transposed and narrowed inputs", "[gradcheck]") {
  require_gradcheck("linear [3,4] W[5,4] b[5]", [](Inputs v) { return linear(v[0], v[1], v[2]); },
                    {rand_var({3, 4}, 161), rand_var({5, 4}, 162), rand_var({5}, 163)});
  require_gradcheck("linear [2,3,4] W[5,4] b[5]", [](Inputs v) { return linear(v[0], v[1], v[2]); },
                    {rand_var({2, 3, 4}, 164), rand_var({5, 4}, 165), rand_var({5}, 166)});
  require_gradcheck("linear [2,3,4] W[5,4] no bias", [](Inputs v) { return linear(v[0], v[1], Variable()); },
                    {rand_var({2, 3, 4}, 167), rand_var({5, 4}, 168)});
  require_gradcheck("linear of a transposed leaf and a transposed weight",
                    [](Inputs v) { return linear(v[0], v[1], v[2]); },
                    {transposed_leaf(3, 4, 169), transposed_leaf(5, 4, 170), rand_var({5}, 171)});
  require_gradcheck("linear of a narrowed leaf", [](Inputs v) { return linear(v[0], v[1], v[2]); },
                    {narrowed_leaf({2, 3, 4}, 172), rand_var({2, 4}, 173), rand_var({2}, 174)});
}

// A frozen weight (requires_grad off) with a bias that learns: the backward forms db alone from
// g (weight_and_bias_grads without dW), a path no other case reaches.
TEST_CASE("gradcheck: linear with a frozen weight and a learned bias", "[gradcheck]") {
  const Variable w = rand_var({5, 4}, 190, -1.0, 1.0, /*requires_grad=*/false);
  require_gradcheck("linear [2,3,4], frozen W[5,4], b[5]", [w](Inputs v) { return linear(v[0], w, v[1]); },
                    {rand_var({2, 3, 4}, 191), rand_var({5}, 192)});
  require_gradcheck("linear+gelu [3,4], frozen W[5,4], b[5]",
                    [w](Inputs v) { return linear(v[0], w, v[1], k::Unary::GeluErf); },
                    {rand_var({3, 4}, 193), rand_var({5}, 194)});
}

TEST_CASE("gradcheck: linear with an activation in the epilogue (gelu, gelu_tanh, relu, silu), batched and strided",
          "[gradcheck]") {
  for (k::Unary act : {k::Unary::GeluErf, k::Unary::GeluTanh, k::Unary::Relu, k::Unary::Silu}) {
    INFO("act " << int(act));
    require_gradcheck("linear+act [2,3,4] W[5,4] b[5]", [act](Inputs v) { return linear(v[0], v[1], v[2], act); },
                      {rand_var({2, 3, 4}, 175), rand_var({5, 4}, 176), rand_var({5}, 177)});
  }
  require_gradcheck("linear+gelu, no bias, transposed leaf",
                    [](Inputs v) { return linear(v[0], v[1], Variable(), k::Unary::GeluErf); },
                    {transposed_leaf(3, 4, 178), transposed_leaf(5, 4, 179)});
}

TEST_CASE("gradcheck: mlp (two linear layers and an activation as one node), batched and strided", "[gradcheck]") {
  for (k::Unary act : {k::Unary::GeluErf, k::Unary::Silu}) {
    INFO("act " << int(act));
    require_gradcheck("mlp [2,3,4] W1[6,4] b1[6] W2[5,6] b2[5]",
                      [act](Inputs v) { return mlp(v[0], v[1], v[2], v[3], v[4], act); },
                      {rand_var({2, 3, 4}, 180), rand_var({6, 4}, 181), rand_var({6}, 182), rand_var({5, 6}, 183),
                       rand_var({5}, 184)});
  }
  require_gradcheck("mlp, no biases, transposed leaves",
                    [](Inputs v) { return mlp(v[0], v[1], Variable(), v[2], Variable(), k::Unary::GeluErf); },
                    {transposed_leaf(3, 4, 185), transposed_leaf(6, 4, 186), transposed_leaf(5, 6, 187)});
}

TEST_CASE("gradcheck: linear and mlp with a residual added in the GEMM's epilogue, batched and strided",
          "[gradcheck]") {
  require_gradcheck("linear [2,3,4] W[5,4] b[5] + r[2,3,5]", [](Inputs v) { return linear(v[0], v[1], v[2], v[3]); },
                    {rand_var({2, 3, 4}, 195), rand_var({5, 4}, 196), rand_var({5}, 197), rand_var({2, 3, 5}, 198)});
  require_gradcheck("linear, no bias, transposed leaves + a transposed residual",
                    [](Inputs v) { return linear(v[0], v[1], Variable(), v[2]); },
                    {transposed_leaf(3, 4, 199), transposed_leaf(5, 4, 200), transposed_leaf(3, 5, 201)});
  require_gradcheck("mlp [2,3,4] W1[6,4] b1[6] W2[5,6] b2[5] + r[2,3,5]",
                    [](Inputs v) { return mlp(v[0], v[1], v[2], v[3], v[4], k::Unary::GeluErf, v[5]); },
                    {rand_var({2, 3, 4}, 202), rand_var({6, 4}, 203), rand_var({6}, 204), rand_var({5, 6}, 205),
                     rand_var({5}, 206), rand_var({2, 3, 5}, 207)});
  // A frozen residual: no gradient asked for it, the others' still right.
  const Variable r = rand_var({3, 5}, 208, -1.0, 1.0, /*requires_grad=*/false);
  require_gradcheck("linear [3,4] W[5,4] b[5] + frozen r", [r](Inputs v) { return linear(v[0], v[1], v[2], r); },
                    {rand_var({3, 4}, 209), rand_var({5, 4}, 210), rand_var({5}, 211)});
  CHECK_THROWS_WITH(linear(rand_var({3, 4}, 212), rand_var({5, 4}, 213), Variable(), rand_var({3, 4}, 214)),
                    Catch::Contains("linear: the residual must be [3, 5]") && Catch::Contains("[3, 4]"));
  CHECK_THROWS_WITH(mlp(rand_var({3, 4}, 215), rand_var({6, 4}, 216), Variable(), rand_var({5, 6}, 217), Variable(),
                        k::Unary::GeluErf, rand_var({5}, 218)),
                    Catch::Contains("mlp: the residual must be [3, 5]"));
}

TEST_CASE("gradcheck: matmul with transposed, permuted and narrowed operands", "[gradcheck]") {
  require_gradcheck("matmul transposed views",
                    [](Inputs v) { return matmul(transpose(v[0], 0, 1), transpose(v[1], 0, 1)); },
                    {rand_var({4, 3}, 75), rand_var({5, 4}, 76)});
  require_gradcheck("matmul transposed leaves", [](Inputs v) { return matmul(v[0], v[1]); },
                    {transposed_leaf(3, 4, 77), transposed_leaf(4, 5, 78)});
  require_gradcheck("matmul narrowed leaves", [](Inputs v) { return matmul(v[0], v[1]); },
                    {narrowed_leaf({2, 3, 4}, 79), narrowed_leaf({4, 2}, 80)});
  require_gradcheck("matmul permuted batched @ 2-D weight",
                    [](Inputs v) { return matmul(permute(v[0], {1, 0, 2}), v[1]); },
                    {rand_var({3, 2, 4}, 81), transposed_leaf(4, 5, 82)});
  require_gradcheck("matmul batched transposed (q @ k^T)",
                    [](Inputs v) { return matmul(v[0], transpose(v[1], -1, -2)); },
                    {rand_var({2, 3, 4}, 83), rand_var({2, 5, 4}, 84)});
  require_gradcheck("matmul expanded operand",
                    [](Inputs v) { return matmul(expand(v[0], {2, 3, 4}), v[1]); },
                    {rand_var({1, 3, 4}, 85), rand_var({2, 4, 2}, 86)});
}

// ============================================================== softmax family

TEST_CASE("gradcheck: softmax along last, first, middle and negative dims", "[gradcheck]") {
  Variable x = rand_var({2, 3, 4}, 87, -2.0, 2.0);
  require_gradcheck("softmax -1", [](Inputs v) { return softmax(v[0], -1); }, {x});
  require_gradcheck("softmax 0", [](Inputs v) { return softmax(v[0], 0); }, {x});
  require_gradcheck("softmax 1", [](Inputs v) { return softmax(v[0], 1); }, {x});
  require_gradcheck("softmax -2 of transposed view", [](Inputs v) { return softmax(transpose(v[0], 0, 2), -2); },
                    {x});
  require_gradcheck("softmax transposed leaf", [](Inputs v) { return softmax(v[0], 1); }, {transposed_leaf(3, 5, 88)});
}

TEST_CASE("gradcheck: log_softmax along last, first, middle and negative dims", "[gradcheck]") {
  Variable x = rand_var({2, 3, 4}, 89, -2.0, 2.0);
  require_gradcheck("log_softmax -1", [](Inputs v) { return log_softmax(v[0], -1); }, {x});
  require_gradcheck("log_softmax 0", [](Inputs v) { return log_softmax(v[0], 0); }, {x});
  require_gradcheck("log_softmax 1", [](Inputs v) { return log_softmax(v[0], 1); }, {x});
  require_gradcheck("log_softmax -3 of permuted view",
                    [](Inputs v) { return log_softmax(permute(v[0], {2, 0, 1}), -3); }, {x});
  require_gradcheck("log_softmax narrowed leaf", [](Inputs v) { return log_softmax(v[0], -1); },
                    {narrowed_leaf({3, 4}, 90)});
}

// ============================================================== normalisation

TEST_CASE("gradcheck: layer_norm with weight and bias", "[gradcheck]") {
  Variable x = rand_var({2, 3, 5}, 91, -2.0, 2.0);
  Variable w = rand_var({5}, 92, 0.5, 1.5), b = rand_var({5}, 93);
  require_gradcheck("layer_norm w b", [](Inputs v) { return layer_norm(v[0], v[1], v[2]); }, {x, w, b});
  require_gradcheck("layer_norm 1-d", [](Inputs v) { return layer_norm(v[0], v[1], v[2], 1e-3); },
                    {rand_var({5}, 94), w, b});
}

TEST_CASE("gradcheck: layer_norm without weight/bias and with weight only", "[gradcheck]") {
  Variable x = rand_var({4, 6}, 95, -2.0, 2.0);
  require_gradcheck("layer_norm plain", [](Inputs v) { return layer_norm(v[0], Variable(), Variable()); }, {x});
  require_gradcheck("layer_norm weight only",
                    [](Inputs v) { return layer_norm(v[0], v[1], Variable()); }, {x, rand_var({6}, 96)});
  require_gradcheck("layer_norm bias only",
                    [](Inputs v) { return layer_norm(v[0], Variable(), v[1]); }, {x, rand_var({6}, 97)});
}

TEST_CASE("gradcheck: layer_norm of transposed and narrowed inputs", "[gradcheck]") {
  require_gradcheck("layer_norm transposed view",
                    [](Inputs v) { return layer_norm(transpose(v[0], 0, 1), v[1], v[2]); },
                    {rand_var({5, 3}, 98), rand_var({5}, 99), rand_var({5}, 100)});
  require_gradcheck("layer_norm narrowed leaf and strided weight",
                    [](Inputs v) { return layer_norm(v[0], v[1], Variable()); },
                    {narrowed_leaf({3, 4}, 101), narrowed_leaf({4}, 102)});
}

TEST_CASE("gradcheck: rms_norm with and without weight", "[gradcheck]") {
  Variable x = rand_var({2, 3, 5}, 103, -2.0, 2.0);
  require_gradcheck("rms_norm weight", [](Inputs v) { return rms_norm(v[0], v[1]); }, {x, rand_var({5}, 104)});
  require_gradcheck("rms_norm plain", [](Inputs v) { return rms_norm(v[0], Variable()); }, {x});
  require_gradcheck("rms_norm transposed view",
                    [](Inputs v) { return rms_norm(transpose(v[0], 0, 1), v[1], 1e-3); },
                    {rand_var({4, 3}, 105), rand_var({4}, 106)});
}

// ============================================================== loss

TEST_CASE("gradcheck: cross_entropy mean with an ignore_index row", "[gradcheck]") {
  Tensor target = ids({1, -100, 3, 0}, {4});
  require_gradcheck("cross_entropy mean",
                    [target](Inputs v) { return cross_entropy(v[0], target); }, {rand_var({4, 5}, 107, -2.0, 2.0)});
}

TEST_CASE("gradcheck: cross_entropy sum and none with an ignore_index row", "[gradcheck]") {
  Tensor target = ids({2, 4, -100, 2}, {4});
  Variable logits = rand_var({4, 5}, 108, -2.0, 2.0);
  require_gradcheck("cross_entropy sum",
                    [target](Inputs v) { return cross_entropy(v[0], target, -100, k::Reduction::Sum); }, {logits});
  require_gradcheck("cross_entropy none",
                    [target](Inputs v) { return cross_entropy(v[0], target, -100, k::Reduction::None); }, {logits});
}

TEST_CASE("gradcheck: cross_entropy of transposed logits with a custom ignore_index", "[gradcheck]") {
  Tensor target = ids({0, 2, -1}, {3});
  require_gradcheck("cross_entropy transposed leaf",
                    [target](Inputs v) { return cross_entropy(v[0], target, -1); }, {transposed_leaf(3, 4, 109)});
  require_gradcheck("cross_entropy transposed view none",
                    [target](Inputs v) { return cross_entropy(transpose(v[0], 0, 1), target, -1, k::Reduction::None); },
                    {rand_var({4, 3}, 110)});
  // ignore_index that is a valid class: rows with target 1 are skipped.
  Tensor t2 = ids({1, 2, 1, 0}, {4});
  require_gradcheck("cross_entropy ignore a valid class",
                    [t2](Inputs v) { return cross_entropy(v[0], t2, 1, k::Reduction::Mean); }, {rand_var({4, 3}, 111)});
}

// ============================================================== indexing

TEST_CASE("gradcheck: embedding with repeated indices", "[gradcheck]") {
  Tensor idx = ids({1, 3, 1, 4, 1, 0}, {2, 3});
  require_gradcheck("embedding 2-d idx", [idx](Inputs v) { return embedding(v[0], idx); }, {rand_var({5, 3}, 112)});
  Tensor idx1 = ids({2, 2, 0}, {3});
  require_gradcheck("embedding transposed weight", [idx1](Inputs v) { return embedding(v[0], idx1); },
                    {transposed_leaf(4, 3, 113)});
}

TEST_CASE("gradcheck: index_select with repeated indices on several dims", "[gradcheck]") {
  Variable x = rand_var({4, 3, 2}, 114);
  Tensor i0 = ids({2, 0, 2, 3}, {4}), i1 = ids({1, 1, 0}, {3}), i2 = ids({1, 0, 1}, {3});
  require_gradcheck("index_select dim 0", [i0](Inputs v) { return index_select(v[0], 0, i0); }, {x});
  require_gradcheck("index_select dim 1", [i1](Inputs v) { return index_select(v[0], 1, i1); }, {x});
  require_gradcheck("index_select dim -1", [i2](Inputs v) { return index_select(v[0], -1, i2); }, {x});
  require_gradcheck("index_select transposed view",
                    [i1](Inputs v) { return index_select(transpose(v[0], 0, 1), 0, i1); }, {x});
}

TEST_CASE("gradcheck: gather with repeated indices on dims 0, 1 and -1", "[gradcheck]") {
  Variable x = rand_var({3, 4}, 115);
  Tensor i1 = ids({0, 3, 2, 2, 1, 0}, {3, 2});
  require_gradcheck("gather dim 1", [i1](Inputs v) { return gather(v[0], 1, i1); }, {x});
  Tensor i0 = ids({0, 2, 1, 2, 2, 2, 0, 1}, {2, 4});
  require_gradcheck("gather dim 0", [i0](Inputs v) { return gather(v[0], 0, i0); }, {x});
  Tensor i3 = ids({1, 1, 0, 2, 2, 0, 1, 0}, {2, 2, 2});
  require_gradcheck("gather dim -1 of a permuted view",
                    [i3](Inputs v) { return gather(permute(v[0], {1, 2, 0}), -1, i3); },
                    {rand_var({3, 2, 3}, 116)});
  require_gradcheck("gather transposed leaf", [i1](Inputs v) { return gather(v[0], 1, i1); },
                    {transposed_leaf(3, 4, 117)});
}

// ============================================================== shape ops

TEST_CASE("gradcheck: reshape of contiguous and non-contiguous inputs", "[gradcheck]") {
  Variable x = rand_var({2, 3, 4}, 118);
  require_gradcheck("reshape", [](Inputs v) { return reshape(v[0], {4, -1}); }, {x});
  require_gradcheck("reshape of transposed (copy)",
                    [](Inputs v) { return mul(reshape(transpose(v[0], 0, 2), {-1}), reshape(v[0], {24})); }, {x});
  require_gradcheck("reshape of a transposed leaf", [](Inputs v) { return reshape(v[0], {2, 6}); },
                    {transposed_leaf(3, 4, 119)});
}

TEST_CASE("gradcheck: transpose and permute with negative dims", "[gradcheck]") {
  Variable x = rand_var({2, 3, 4}, 120);
  require_gradcheck("transpose", [](Inputs v) { return transpose(v[0], 0, -1); }, {x});
  require_gradcheck("permute", [](Inputs v) { return permute(v[0], {-1, 0, 1}); }, {x});
  require_gradcheck("permute then exp", [](Inputs v) { return exp(permute(v[0], {1, 2, 0})); }, {x});
}

TEST_CASE("gradcheck: narrow and select with negative dims and indices", "[gradcheck]") {
  Variable x = rand_var({3, 4, 5}, 121);
  require_gradcheck("narrow", [](Inputs v) { return narrow(v[0], 1, 1, 2); }, {x});
  require_gradcheck("narrow -1", [](Inputs v) { return narrow(v[0], -1, 2, 3); }, {x});
  require_gradcheck("select", [](Inputs v) { return select(v[0], 0, 2); }, {x});
  require_gradcheck("select -1, -2", [](Inputs v) { return select(v[0], -1, -2); }, {x});
  require_gradcheck("select of a transposed leaf", [](Inputs v) { return select(v[0], 1, 1); },
                    {transposed_leaf(4, 3, 122)});
}

TEST_CASE("gradcheck: expand, unsqueeze and squeeze", "[gradcheck]") {
  require_gradcheck("expand", [](Inputs v) { return expand(v[0], {2, 3, 4}); }, {rand_var({3, 1}, 123)});
  require_gradcheck("expand leading", [](Inputs v) { return expand(v[0], {2, 4}); }, {rand_var({4}, 124)});
  Variable x = rand_var({3, 4}, 125);
  require_gradcheck("unsqueeze 0", [](Inputs v) { return unsqueeze(v[0], 0); }, {x});
  require_gradcheck("unsqueeze -1", [](Inputs v) { return unsqueeze(v[0], -1); }, {x});
  Variable y = rand_var({3, 1, 4}, 126);
  require_gradcheck("squeeze 1", [](Inputs v) { return squeeze(v[0], 1); }, {y});
  require_gradcheck("squeeze -2", [](Inputs v) { return squeeze(v[0], -2); }, {y});
  require_gradcheck("unsqueeze transposed then expand",
                    [](Inputs v) { return expand(unsqueeze(transpose(v[0], 0, 1), 1), {4, 2, 3}); }, {x});
}

TEST_CASE("gradcheck: contiguous of views", "[gradcheck]") {
  require_gradcheck("contiguous of transposed", [](Inputs v) { return contiguous(transpose(v[0], 0, 1)); },
                    {rand_var({3, 4}, 127)});
  require_gradcheck("contiguous of contiguous", [](Inputs v) { return contiguous(v[0]); }, {rand_var({3, 4}, 128)});
  require_gradcheck("contiguous of a narrowed leaf", [](Inputs v) { return contiguous(v[0]); },
                    {narrowed_leaf({2, 3}, 129)});
}

TEST_CASE("gradcheck: cat along several dims with non-contiguous pieces", "[gradcheck]") {
  Variable a = rand_var({2, 3}, 130), b = rand_var({2, 1}, 131), c = transposed_leaf(2, 4, 132);
  require_gradcheck("cat dim 1", [](Inputs v) { return cat({v[0], v[1], v[2]}, 1); }, {a, b, c});
  require_gradcheck("cat dim -1", [](Inputs v) { return cat({v[0], v[1]}, -1); }, {a, c});
  require_gradcheck("cat dim 0", [](Inputs v) { return cat({v[0], transpose(v[1], 0, 1)}, 0); },
                    {rand_var({2, 4}, 133), rand_var({4, 3}, 134)});
  require_gradcheck("cat same input twice", [](Inputs v) { return cat({v[0], v[0]}, 0); }, {a});
}

TEST_CASE("gradcheck: split with uneven sizes and negative dims", "[gradcheck]") {
  Variable x = rand_var({3, 6}, 135);
  require_gradcheck("split -1",
                    [](Inputs v) {
                      std::vector<Variable> p = split(v[0], {1, 3, 2}, -1);
                      return cat({mul(p[2], p[2]), exp(p[0]), p[1]}, 1);
                    },
                    {x});
  require_gradcheck("split 0 partially used",
                    [](Inputs v) {
                      std::vector<Variable> p = split(v[0], {2, 1}, 0);
                      return mul(p[0], 3.0);
                    },
                    {x});
}

// ============================================================== dropout

TEST_CASE("gradcheck: dropout with a re-seeded generator", "[gradcheck]") {
  Variable x = rand_var({6, 7}, 136);
  {
    Generator g(7);
    Variable y = dropout(x.detach(), 0.4, true, g);
    auto ys = y.data().to_vector<double>();
    int zeros = 0;
    for (double e : ys) zeros += e == 0.0;
    REQUIRE(zeros > 0);                     // the mask really drops something
    REQUIRE(zeros < int(ys.size()));
  }
  require_gradcheck("dropout",
                    [](Inputs v) {
                      Generator g(7);  // same mask on every evaluation
                      return dropout(v[0], 0.4, true, g);
                    },
                    {x});
  require_gradcheck("dropout of a transposed view",
                    [](Inputs v) {
                      Generator g(11);
                      return dropout(transpose(v[0], 0, 1), 0.25, true, g);
                    },
                    {x});
  require_gradcheck("dropout eval is identity",
                    [](Inputs v) {
                      Generator g(7);
                      return dropout(v[0], 0.4, false, g);
                    },
                    {x});
  require_gradcheck("dropout p = 0",
                    [](Inputs v) {
                      Generator g(7);
                      return mul(dropout(v[0], 0.0, true, g), 2.0);
                    },
                    {x});
}

// ============================================================== compositions

TEST_CASE("gradcheck: causal attention block (masked_fill -inf, softmax, matmul)", "[gradcheck]") {
  // mask[i][j] = j > i: row 0 keeps a single entry.
  Tensor mask = Tensor::from_vector<double>({0, 1, 1, 0, 0, 1, 0, 0, 0}, {3, 3});
  const double inf = std::numeric_limits<double>::infinity();
  require_gradcheck("attention",
                    [mask, inf](Inputs v) {
                      Variable s = mul(matmul(v[0], transpose(v[1], -1, -2)), 0.5);
                      Variable p = softmax(masked_fill(s, mask, -inf), -1);
                      return matmul(p, v[2]);
                    },
                    {rand_var({2, 3, 4}, 137), rand_var({2, 3, 4}, 138), rand_var({2, 3, 4}, 139)});
}

TEST_CASE("gradcheck: two-layer MLP with layer_norm, gelu and cross_entropy", "[gradcheck]") {
  Tensor target = ids({2, 0, -100, 1, 2, 0}, {6});
  require_gradcheck("mlp",
                    [target](Inputs v) {
                      Variable h = gelu(add(matmul(v[0], v[1]), v[2]));
                      h = layer_norm(reshape(h, {2, 3, 5}), v[3], v[4]);
                      Variable logits = matmul(reshape(h, {6, 5}), v[5]);
                      return cross_entropy(logits, target);
                    },
                    {rand_var({6, 4}, 140), rand_var({4, 5}, 141), rand_var({5}, 142), rand_var({5}, 143, 0.5, 1.5),
                     rand_var({5}, 144), rand_var({5, 3}, 145)});
}

TEST_CASE("gradcheck: ops receive non-contiguous upstream gradients", "[gradcheck]") {
  // Each op's output is transposed before the loss, so its backward gets a strided grad.
  auto T = [](const Variable& y) { return transpose(y, 0, 1); };
  Variable x = rand_var({3, 4}, 146, -1.5, 1.5);
  Variable pos = rand_var({3, 4}, 147, 0.3, 2.0);
  require_gradcheck("strided grad: elementwise",
                    [T](Inputs v) { return T(add(mul(v[0], v[1]), div(pow(v[1], v[0]), v[1]))); }, {x, pos});
  require_gradcheck("strided grad: unary",
                    [T](Inputs v) { return T(add(gelu(v[0]), mul(log(v[1]), sigmoid(v[0])))); }, {x, pos});
  require_gradcheck("strided grad: softmax", [T](Inputs v) { return T(softmax(v[0], -1)); }, {x});
  require_gradcheck("strided grad: log_softmax", [T](Inputs v) { return T(log_softmax(v[0], 0)); }, {x});
  require_gradcheck("strided grad: layer_norm",
                    [T](Inputs v) { return T(layer_norm(v[0], v[1], v[2])); },
                    {x, rand_var({4}, 148), rand_var({4}, 149)});
  require_gradcheck("strided grad: rms_norm", [T](Inputs v) { return T(rms_norm(v[0], v[1])); },
                    {x, rand_var({4}, 150)});
  require_gradcheck("strided grad: matmul", [T](Inputs v) { return T(matmul(v[0], v[1])); },
                    {x, rand_var({4, 5}, 151)});
  require_gradcheck("strided grad: batched matmul with 2-D weight",
                    [T](Inputs v) { return T(matmul(v[0], v[1])); }, {rand_var({2, 3, 4}, 152), rand_var({4, 5}, 153)});
  require_gradcheck("strided grad: reductions keepdim",
                    [T](Inputs v) {
                      return T(add(add(sum(v[0], {0}, true), mean(v[0], {0}, true)),
                                   add(max(v[0], {0}, true), add(logsumexp(v[0], {0}, true), var(v[0], {0}, true)))));
                    },
                    {x});
  require_gradcheck("strided grad: reductions no keepdim",
                    [T](Inputs v) {
                      return T(add(add(sum(v[0], {2}), mean(v[0], {2})),
                                   add(max(v[0], {2}), add(logsumexp(v[0], {2}), var(v[0], {2})))));
                    },
                    {rand_var({3, 2, 4}, 154)});
  Tensor e_idx = ids({1, 0, 1, 2}, {4});
  require_gradcheck("strided grad: embedding", [T, e_idx](Inputs v) { return T(embedding(v[0], e_idx)); }, {x});
  require_gradcheck("strided grad: index_select",
                    [T, e_idx](Inputs v) { return T(index_select(v[0], 1, e_idx)); }, {x});
  Tensor g_idx = ids({3, 0, 0, 1, 2, 2}, {3, 2});
  require_gradcheck("strided grad: gather", [T, g_idx](Inputs v) { return T(gather(v[0], 1, g_idx)); }, {x});
  require_gradcheck("strided grad: narrow/select/cat",
                    [T](Inputs v) {
                      return T(cat({narrow(v[0], 1, 1, 2), unsqueeze(select(v[0], 1, 3), 1), v[0]}, 1));
                    },
                    {x});
  require_gradcheck("strided grad: expand", [T](Inputs v) { return T(expand(v[0], {3, 4})); }, {rand_var({1, 4}, 155)});
  Tensor mask = ids({1, 0, 0, 1}, {4});
  require_gradcheck("strided grad: where/masked_fill",
                    [T, mask](Inputs v) { return T(add(where(mask, v[0], v[1]), masked_fill(v[1], mask, 3.0))); },
                    {x, rand_var({3, 4}, 156)});
  require_gradcheck("strided grad: dropout",
                    [T](Inputs v) {
                      Generator g(3);
                      return T(dropout(v[0], 0.3, true, g));
                    },
                    {x});
  require_gradcheck("strided grad: cross_entropy none",
                    [](Inputs v) {
                      // cat's backward hands each piece a strided narrow of the gradient.
                      Tensor t = ids({0, 2, -100, 1}, {4});
                      return cat({unsqueeze(cross_entropy(v[0], t, -100, k::Reduction::None), 1), v[1]}, 1);
                    },
                    {rand_var({4, 3}, 157), rand_var({4, 2}, 160)});
}

TEST_CASE("autograd: backward with a broadcast (stride-0) grad_output matches a contiguous one", "[autograd]") {
  // The upstream gradient is an expanded view; every backward must read it by its strides.
  auto check = [](const char* name, const std::function<Variable(const Variable&)>& f, const Variable& x) {
    INFO(name);
    Variable y = f(x);
    Generator g(5);
    Tensor row = Tensor::randn({y.dim() >= 2 ? y.shape().back() : 1}, g, DType::F64);
    Tensor gexp = row.expand(y.shape());
    x.zero_grad();
    f(x).backward(gexp);
    Tensor g1 = x.grad();
    x.zero_grad();
    f(x).backward(gexp.contiguous());
    Tensor g2 = x.grad();
    REQUIRE(relpos::test::allclose(g1, g2, 1e-12, 1e-12));
  };
  Variable x = rand_var({3, 4}, 158, -1.5, 1.5);
  Variable w = rand_var({4}, 159);
  check("softmax", [](const Variable& v) { return softmax(v, -1); }, x);
  check("softmax dim 0", [](const Variable& v) { return softmax(v, 0); }, x);
  check("log_softmax", [](const Variable& v) { return log_softmax(v, -1); }, x);
  check("layer_norm", [w](const Variable& v) { return layer_norm(v, w, w); }, x);
  check("rms_norm", [w](const Variable& v) { return rms_norm(v, w); }, x);
  check("matmul", [](const Variable& v) { return matmul(v, transpose(v, 0, 1)); }, x);
  check("gelu", [](const Variable& v) { return gelu(v); }, x);
  check("embedding", [](const Variable& v) { return embedding(v, ids({2, 0, 2}, {3})); }, x);
  check("index_select", [](const Variable& v) { return index_select(v, 1, ids({3, 3, 1}, {3})); }, x);
  check("gather", [](const Variable& v) { return gather(v, 1, ids({3, 0, 1, 1, 2, 0}, {3, 2})); }, x);
  check("cross_entropy none",
        [](const Variable& v) { return cross_entropy(v, ids({1, -100, 3}, {3}), -100, k::Reduction::None); }, x);
  check("max", [](const Variable& v) { return max(v, {0}); }, x);
  check("var", [](const Variable& v) { return var(v, {0}); }, x);
  check("cat", [](const Variable& v) { return cat({v, v}, 1); }, x);
}
