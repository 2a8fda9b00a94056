// kernels/cpu/elementwise.cpp — unary, binary (broadcasting) and ternary
// (where) loops on the CPU, built on core/strided.h. Output is always a fresh
// contiguous tensor.
#include <atomic>
#include <cmath>
#include <limits>
#include <numbers>
#include <type_traits>

#include "core/float16.h"
#include "core/strided.h"
#include "kernels/backend.h"
#include "kernels/cpu/unary_value.h"

namespace relpos::k::cpu {

namespace {

template <typename T>
T binary_value(Binary op, T a, T b) {
  switch (op) {
    case Binary::Add:
      return a + b;
    case Binary::Sub:
      return a - b;
    case Binary::Mul:
      return a * b;
    case Binary::Div:
      return a / b;
    case Binary::Pow:
      return T(std::pow(a, b));
    case Binary::Maximum:
      return a > b ? a : b;
    case Binary::Minimum:
      return a < b ? a : b;
    case Binary::Eq:
      return T(a == b);
    case Binary::Ne:
      return T(a != b);
    case Binary::Lt:
      return T(a < b);
    case Binary::Le:
      return T(a <= b);
    case Binary::Gt:
      return T(a > b);
    case Binary::Ge:
      return T(a >= b);
  }
  return a;
}

// Run f(a, b) over the broadcast of a and b into a fresh contiguous tensor.
template <typename T, typename F>
Tensor broadcast_apply(const Tensor& a, const Tensor& b, const char* op, F f) {
  Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = Tensor::empty(shape, a.dtype());
  Tensor ae = a.expand(shape), be = b.expand(shape);
  T* o = out.data<T>();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  for_each_run<3>(shape, {out.strides(), ae.strides(), be.strides()}, [&](auto off, int64_t n, auto st) {
    T* po = o + off[0];
    const T* xa = pa + off[1];
    const T* xb = pb + off[2];
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
      for (int64_t i = 0; i < n; ++i) po[i] = f(xa[i], xb[i]);
    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
      const T vb = xb[0];
      for (int64_t i = 0; i < n; ++i) po[i] = f(xa[i], vb);
    } else {
      for (int64_t i = 0; i < n; ++i) po[i * st[0]] = f(xa[i * st[1]], xb[i * st[2]]);
    }
  });
  return out;
}

}  // namespace

Tensor unary(Unary op, const Tensor& x, double p, double q) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  visit_float(x.dtype(), "unary op", [&]<typename T>() {
    visit_unary(op, [&]<Unary OP>() {
      T* o = out.data<T>();
      const T* px = x.data<T>();
      const T tp = T(p), tq = T(q);
      for_each_run<2>(x.shape(), {out.strides(), x.strides()}, [&](auto off, int64_t n, auto st) {
        T* po = o + off[0];
        const T* xx = px + off[1];
        if constexpr (OP == Unary::GeluErf || OP == Unary::GeluErfGrad)
          if (st[1] == 1 &&
              gelu_erf_run_if_f32(xx, OP == Unary::GeluErf ? po : nullptr, OP == Unary::GeluErf ? nullptr : po, n))
            return;
        if (st[1] == 1)
          for (int64_t i = 0; i < n; ++i) po[i] = unary_value<OP>(xx[i], tp, tq);
        else
          for (int64_t i = 0; i < n; ++i) po[i] = unary_value<OP>(xx[i * st[1]], tp, tq);
      });
    });
  });
  return out;
}

Tensor unary_grad(Unary deriv, const Tensor& g, const Tensor& x, double p, double q) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  visit_float(x.dtype(), "unary_grad", [&]<typename T>() {
    visit_unary(deriv, [&]<Unary OP>() {
      T* o = out.data<T>();
      const T* pg = g.data<T>();
      const T* px = x.data<T>();
      const T tp = T(p), tq = T(q);
      for_each_run<3>(x.shape(), {out.strides(), g.strides(), x.strides()}, [&](auto off, int64_t n, auto st) {
        T* po = o + off[0];
        const T* gg = pg + off[1];
        const T* xx = px + off[2];
        if (st[1] == 1 && st[2] == 1)
          for (int64_t i = 0; i < n; ++i) po[i] = gg[i] * unary_value<OP>(xx[i], tp, tq);
        else
          for (int64_t i = 0; i < n; ++i) po[i] = gg[i * st[1]] * unary_value<OP>(xx[i * st[2]], tp, tq);
      });
    });
  });
  return out;
}

Tensor binary(Binary op, const Tensor& a, const Tensor& b) {
  return visit_all(a.dtype(), [&]<typename T>() {
    // Specialise the hot arithmetic ops so the inner loop is a plain
    // expression.
    switch (op) {
      case Binary::Add:
        return broadcast_apply<T>(a, b, "add", [](T x, T y) { return x + y; });
      case Binary::Sub:
        return broadcast_apply<T>(a, b, "sub", [](T x, T y) { return x - y; });
      case Binary::Mul:
        return broadcast_apply<T>(a, b, "mul", [](T x, T y) { return x * y; });
      case Binary::Div:
        if constexpr (std::is_integral_v<T>) {
          // Integer x / 0 and INT64_MIN / -1 trap (SIGFPE): flag them and throw
          // instead.
          std::atomic<bool> bad{false};
          Tensor out = broadcast_apply<T>(a, b, "div", [&bad](T x, T y) {
            if (y == 0 || (y == -1 && x == std::numeric_limits<T>::min())) {
              bad.store(true, std::memory_order_relaxed);
              return T(0);
            }
            return T(x / y);
          });
          RELPOS_CHECK(!bad.load(), "div: integer division by zero or overflow in {} / {}", describe(a), describe(b));
          return out;
        }
        return broadcast_apply<T>(a, b, "div", [](T x, T y) { return x / y; });
      default:
        return broadcast_apply<T>(a, b, "binary op", [op](T x, T y) { return binary_value(op, x, y); });
    }
  });
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor c = cond.expand(shape), ae = a.expand(shape), be = b.expand(shape);
  Tensor out = Tensor::empty(shape, a.dtype());
  visit_all(a.dtype(), [&]<typename T>() {
    visit_all(cond.dtype(), [&]<typename C>() {
      T* o = out.data<T>();
      const C* pc = c.data<C>();
      const T* pa = ae.data<T>();
      const T* pb = be.data<T>();
      for_each_run<4>(
          shape, {out.strides(), c.strides(), ae.strides(), be.strides()}, [&](auto off, int64_t n, auto st) {
            for (int64_t i = 0; i < n; ++i)
              o[off[0] + i * st[0]] = pc[off[1] + i * st[1]] != C(0) ? pa[off[2] + i * st[2]] : pb[off[3] + i * st[3]];
          });
    });
  });
  return out;
}

void add_(const Tensor& dst, const Tensor& src, double alpha) {
  Tensor s = src.expand(dst.shape());
  visit_float(dst.dtype(), "add_", [&]<typename T>() {
    T* d = dst.data<T>();
    const T* ps = s.data<T>();
    const T a = T(alpha);
    for_each_run<2>(dst.shape(), {dst.strides(), s.strides()}, [&](auto off, int64_t n, auto st) {
      for (int64_t i = 0; i < n; ++i) d[off[0] + i * st[0]] += a * ps[off[1] + i * st[1]];
    });
  });
  dst.bump_version();
}

void mul_(const Tensor& dst, double s) {
  visit_float(dst.dtype(), "mul_", [&]<typename T>() {
    T* d = dst.data<T>();
    const T a = T(s);
    for_each_run<1>(dst.shape(), {dst.strides()}, [&](auto off, int64_t n, auto st) {
      for (int64_t i = 0; i < n; ++i) d[off[0] + i * st[0]] *= a;
    });
  });
  dst.bump_version();
}

}  // namespace relpos::k::cpu
