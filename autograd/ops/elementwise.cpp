// autograd/ops/elementwise.cpp — pointwise ops. Forward calls the kernel; backward
// multiplies the incoming gradient by the local derivative and, for broadcast inputs,
// sums it back to the input's shape (k::sum_to).
#include "autograd/function.h"
#include "autograd/ops.h"

namespace relpos {

using k::Binary;
using k::Unary;

namespace {

Tensor scalar_like(double v, const Tensor& t) { return Tensor::scalar(v, t.dtype(), t.device()); }

// y = f(x) with dy/dx = deriv(x, y) computed by a kernel.
template <typename Deriv>
Variable unary_op(const char* name, const Variable& x, Unary fwd, Deriv deriv, bool save_output) {
  Tensor y = k::unary(fwd, x.data());
  SavedTensor sx(save_output ? y : x.data(), name);
  return make_result(y, name, {x}, [sx, deriv](const Tensor& g) -> std::vector<Tensor> {
    return {k::mul(g, deriv(sx.get()))};
  });
}

// y = f(x) whose derivative is the pointwise kernel `deriv` of x (or of y when save_output):
// backward is one fused pass g * deriv(.).
Variable unary_op_fused(const char* name, const Variable& x, Unary fwd, Unary deriv, bool save_output) {
  Tensor y = k::unary(fwd, x.data());
  SavedTensor sx(save_output ? y : x.data(), name);
  return make_result(y, name, {x}, [sx, deriv](const Tensor& g) -> std::vector<Tensor> {
    const Tensor& t = sx.get();
    if (g.shape() != t.shape()) return {k::mul(g, k::unary(deriv, t))};
    return {k::unary_grad(deriv, g, t)};
  });
}

}  // namespace

// ---------------------------------------------------------------- binary

Variable add(const Variable& a, const Variable& b) {
  Shape sa = a.shape(), sb = b.shape();
  return make_result(k::add(a.data(), b.data()), "add", {a, b}, [sa, sb](const Tensor& g) -> std::vector<Tensor> {
    return {k::sum_to(g, sa), k::sum_to(g, sb)};
  });
}

Variable sub(const Variable& a, const Variable& b) {
  Shape sa = a.shape(), sb = b.shape();
  return make_result(k::sub(a.data(), b.data()), "sub", {a, b}, [sa, sb](const Tensor& g) -> std::vector<Tensor> {
    return {k::sum_to(g, sa), k::sum_to(k::unary(Unary::Neg, g), sb)};
  });
}

Variable mul(const Variable& a, const Variable& b) {
  SavedTensor sa(a.data(), "mul"), sb(b.data(), "mul");
  bool ga = wants_grad(a), gb = wants_grad(b);
  return make_result(k::mul(a.data(), b.data()), "mul", {a, b}, [sa, sb, ga, gb](const Tensor& g) -> std::vector<Tensor> {
    const Tensor &ta = sa.get(), &tb = sb.get();
    return {ga ? k::sum_to(k::mul(g, tb), ta.shape()) : Tensor(),
            gb ? k::sum_to(k::mul(g, ta), tb.shape()) : Tensor()};
  });
}

// d(a/b)/da = 1/b, d(a/b)/db = -a/b^2
Variable div(const Variable& a, const Variable& b) {
  SavedTensor sa(a.data(), "div"), sb(b.data(), "div");
  bool ga = wants_grad(a), gb = wants_grad(b);
  return make_result(k::div(a.data(), b.data()), "div", {a, b}, [sa, sb, ga, gb](const Tensor& g) -> std::vector<Tensor> {
    const Tensor &ta = sa.get(), &tb = sb.get();
    Tensor gda = k::div(g, tb);
    Tensor da = ga ? k::sum_to(gda, ta.shape()) : Tensor();
    Tensor db = gb ? k::sum_to(k::unary(Unary::Neg, k::div(k::mul(gda, ta), tb)), tb.shape()) : Tensor();
    return {da, db};
  });
}

// d(a^b)/da = b a^(b-1), d(a^b)/db = a^b log a
Variable pow(const Variable& a, const Variable& b) {
  Tensor y = k::binary(Binary::Pow, a.data(), b.data());
  SavedTensor sa(a.data(), "pow"), sb(b.data(), "pow"), sy(y, "pow");
  bool ga = wants_grad(a), gb = wants_grad(b);
  return make_result(y, "pow", {a, b}, [sa, sb, sy, ga, gb](const Tensor& g) -> std::vector<Tensor> {
    const Tensor &ta = sa.get(), &tb = sb.get(), &ty = sy.get();
    Tensor da, db;
    if (ga) {
      Tensor bm1 = k::unary(Unary::AddScalar, tb, -1.0);
      da = k::sum_to(k::mul(g, k::mul(tb, k::binary(Binary::Pow, ta, bm1))), ta.shape());
    }
    if (gb) db = k::sum_to(k::mul(g, k::mul(ty, k::unary(Unary::Log, ta))), tb.shape());
    return {da, db};
  });
}

// ---------------------------------------------------------------- with scalars

Variable add(const Variable& a, double s) {
  return make_result(k::unary(Unary::AddScalar, a.data(), s), "add_scalar", {a},
                     [](const Tensor& g) -> std::vector<Tensor> { return {g}; });
}

Variable mul(const Variable& a, double s) {
  return make_result(k::unary(Unary::MulScalar, a.data(), s), "mul_scalar", {a},
                     [s](const Tensor& g) -> std::vector<Tensor> { return {k::unary(Unary::MulScalar, g, s)}; });
}

// d(x^p)/dx = p x^(p-1)
Variable pow(const Variable& a, double p) {
  SavedTensor sa(a.data(), "pow_scalar");
  return make_result(k::unary(Unary::PowScalar, a.data(), p), "pow_scalar", {a},
                     [sa, p](const Tensor& g) -> std::vector<Tensor> {
                       Tensor d = k::unary(Unary::MulScalar, k::unary(Unary::PowScalar, sa.get(), p - 1.0), p);
                       return {k::mul(g, d)};
                     });
}

// ---------------------------------------------------------------- unary

Variable neg(const Variable& x) {
  return make_result(k::unary(Unary::Neg, x.data()), "neg", {x},
                     [](const Tensor& g) -> std::vector<Tensor> { return {k::unary(Unary::Neg, g)}; });
}

Variable exp(const Variable& x) {  // d/dx = exp(x) = y
  return unary_op("exp", x, Unary::Exp, [](const Tensor& y) { return y; }, true);
}

Variable log(const Variable& x) {  // d/dx = 1/x
  return unary_op("log", x, Unary::Log, [](const Tensor& t) { return k::unary(Unary::PowScalar, t, -1.0); }, false);
}

Variable sqrt(const Variable& x) {  // d/dx = 1 / (2 y)
  return unary_op("sqrt", x, Unary::Sqrt,
                  [](const Tensor& y) { return k::unary(Unary::MulScalar, k::unary(Unary::PowScalar, y, -1.0), 0.5); }, true);
}

Variable rsqrt(const Variable& x) {  // d/dx = -0.5 x^-1.5
  return unary_op("rsqrt", x, Unary::Rsqrt,
                  [](const Tensor& t) { return k::unary(Unary::MulScalar, k::unary(Unary::PowScalar, t, -1.5), -0.5); }, false);
}

Variable abs(const Variable& x) {  // d/dx = sign(x) (0 at 0)
  return unary_op("abs", x, Unary::Abs, [](const Tensor& t) { return k::unary(Unary::Sign, t); }, false);
}

Variable tanh(const Variable& x) {  // d/dx = 1 - y^2
  return unary_op_fused("tanh", x, Unary::Tanh, Unary::TanhGradFromY, true);
}

Variable sigmoid(const Variable& x) {  // d/dx = y (1 - y)
  return unary_op_fused("sigmoid", x, Unary::Sigmoid, Unary::SigmoidGradFromY, true);
}

Variable relu(const Variable& x) {  // d/dx = [x > 0]
  return unary_op_fused("relu", x, Unary::Relu, k::derivative_of(Unary::Relu), false);
}

Variable gelu(const Variable& x, GeluApprox approx) {
  if (approx == GeluApprox::Tanh)
    return unary_op_fused("gelu_tanh", x, Unary::GeluTanh, k::derivative_of(Unary::GeluTanh), false);
  return unary_op_fused("gelu", x, Unary::GeluErf, k::derivative_of(Unary::GeluErf), false);
}

Variable silu(const Variable& x) {
  return unary_op_fused("silu", x, Unary::Silu, k::derivative_of(Unary::Silu), false);
}

// d/dx = [lo <= x <= hi]
Variable clamp(const Variable& x, double lo, double hi) {
  RELPOS_CHECK(lo <= hi, "clamp: lo {} > hi {}", lo, hi);
  SavedTensor sx(x.data(), "clamp");
  return make_result(k::unary(Unary::Clamp, x.data(), lo, hi), "clamp", {x},
                     [sx, lo, hi](const Tensor& g) -> std::vector<Tensor> {
                       return {k::mul(g, k::unary(Unary::ClampMask, sx.get(), lo, hi))};
                     });
}

// ---------------------------------------------------------------- selection

Variable where(const Tensor& cond, const Variable& a, const Variable& b) {
  Shape sa = a.shape(), sb = b.shape();
  Tensor c = cond;
  return make_result(k::where(cond, a.data(), b.data()), "where", {a, b},
                     [c, sa, sb](const Tensor& g) -> std::vector<Tensor> {
                       Tensor zero = scalar_like(0.0, g);
                       return {k::sum_to(k::where(c, g, zero), sa), k::sum_to(k::where(c, zero, g), sb)};
                     });
}

Variable masked_fill(const Variable& x, const Tensor& mask, double value) {
  Tensor m = mask;
  return make_result(k::masked_fill(x.data(), mask, value), "masked_fill", {x},
                     [m](const Tensor& g) -> std::vector<Tensor> { return {k::masked_fill(g, m, 0.0)}; });
}

Variable causal_fill(const Variable& x, int64_t q_offset, int64_t k_offset, double value) {
  return make_result(k::causal_fill(x.data(), q_offset, k_offset, value), "causal_fill", {x},
                     [q_offset, k_offset](const Tensor& g) -> std::vector<Tensor> {
                       return {k::causal_fill(g, q_offset, k_offset, 0.0)};
                     });
}

Tensor eq(const Variable& a, const Variable& b) { return k::binary(Binary::Eq, a.data(), b.data()); }
Tensor ne(const Variable& a, const Variable& b) { return k::binary(Binary::Ne, a.data(), b.data()); }
Tensor lt(const Variable& a, const Variable& b) { return k::binary(Binary::Lt, a.data(), b.data()); }
Tensor le(const Variable& a, const Variable& b) { return k::binary(Binary::Le, a.data(), b.data()); }
Tensor gt(const Variable& a, const Variable& b) { return k::binary(Binary::Gt, a.data(), b.data()); }
Tensor ge(const Variable& a, const Variable& b) { return k::binary(Binary::Ge, a.data(), b.data()); }

// ---------------------------------------------------------------- operators

Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
Variable operator/(const Variable& a, const Variable& b) { return div(a, b); }
Variable operator-(const Variable& x) { return neg(x); }
Variable operator+(const Variable& a, double s) { return add(a, s); }
Variable operator-(const Variable& a, double s) { return add(a, -s); }
Variable operator*(const Variable& a, double s) { return mul(a, s); }
Variable operator/(const Variable& a, double s) { return mul(a, 1.0 / s); }
Variable operator*(double s, const Variable& a) { return mul(a, s); }

}  // namespace relpos
