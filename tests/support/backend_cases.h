// tests/support/backend_cases.h (target relpos_test_support) — the op-case table of the
// backend test harness (tests/kernels/test_backend_ops.cpp, tests/cuda/test_cuda_kernels.cpp)
// and of its perf mode (bench/bench_backend_ops.cpp). ggml's test-backend-ops is the model: a case is a list
// of input specs (shape, memory layout, value distribution) and a function running raw k::
// ops on tensors already on the device under test; the harness builds the same inputs
// (same values, same views) on every device and compares each backend with the CPU.
// Header-only and without Catch2, so the bench links it too.
#pragma once
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/ops.h"
#include "core/tensor.h"
#include "kernels/ops.h"

namespace relpos::cases {

// How an input sits in memory: the logical shape is always Input::shape.
enum class Layout {
  Contiguous,
  Transposed,      // a transpose(-2, -1) view of a contiguous [..., N, M] tensor
  Strided,         // every other element of the last dim (slice step 2)
  Broadcast0,      // dim 0 expanded from size 1 (stride 0; read-only inputs only)
  SwapBatch,       // a transpose(0, 1) view (non-uniform batch strides for matmul)
};
enum class Fill {
  Uniform,    // uniform in [lo, hi)
  Index,      // int64 in [0, bound)
  Mask,       // 0 or 1 in the case's dtype
  Special,    // uniform, then NaN, +Inf, -Inf in the first three elements (of the base tensor)
  MaskedRow,  // uniform, then the first row of the last dim all -Inf
};

struct Input {
  Shape shape;
  Layout layout = Layout::Contiguous;
  Fill fill = Fill::Uniform;
  double lo = -1.0, hi = 1.0;
  int64_t bound = 0;  // Fill::Index
  bool constant = false;  // an operand the op takes no gradient for (a lookup table)
  bool differentiable() const { return fill == Fill::Uniform && !constant; }
};

inline Input in(Shape s, Layout l = Layout::Contiguous) { return Input{std::move(s), l}; }
inline Input pos(Shape s, Layout l = Layout::Contiguous) { return Input{std::move(s), l, Fill::Uniform, 0.2, 2.0}; }
inline Input cst(Shape s) { return Input{std::move(s), Layout::Contiguous, Fill::Uniform, -1.0, 1.0, 0, true}; }
inline Input idx(Shape s, int64_t bound) { return Input{std::move(s), Layout::Contiguous, Fill::Index, 0, 0, bound}; }

using RunFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&, Device)>;
using GradFn = std::function<Variable(const std::vector<Variable>&)>;

struct OpCase {
  std::string name;  // unique, e.g. "binary Add [3, 17] + [17]"
  std::string op;    // the k:: op under test
  std::vector<Input> inputs;
  RunFn run;                                       // outputs to compare (in-place ops return the mutated inputs)
  std::vector<DType> dtypes{DType::F32, DType::F64};
  double rtol32 = 1e-5, atol32 = 1e-6;             // backend vs CPU, and f32 vs f64 on the CPU
  double rtol64 = 1e-12, atol64 = 1e-12;
  bool nan_expected = false;                       // Special inputs: the output must hold a NaN
  bool exact = false;                              // backends must match the CPU bit for bit
  GradFn grad;                                     // autograd form for the float64 gradcheck, if any
  double flops = 0.0;                              // per run, for the perf mode (0: report GB/s)
};

// The base (contiguous) shape an input is a view of.
inline Shape base_shape(const Input& s) {
  Shape b = s.shape;
  const size_t n = b.size();
  switch (s.layout) {
    case Layout::Contiguous: break;
    case Layout::Transposed: if (n >= 2) std::swap(b[n - 1], b[n - 2]); break;
    case Layout::Strided: if (n >= 1) b[n - 1] = 2 * b[n - 1]; break;
    case Layout::Broadcast0: if (n >= 1) b[0] = 1; break;
    case Layout::SwapBatch: if (n >= 2) std::swap(b[0], b[1]); break;
  }
  return b;
}

// Build input s on device: the same values (from seed) and the same view on every device.
// round32: values rounded to float32 first, so a float64 run sees exactly the float32 inputs.
inline Tensor make_input(const Input& s, DType dtype, Device device, uint64_t seed, bool round32 = false) {
  const Shape base = base_shape(s);
  Generator g(seed);
  Tensor t;
  if (s.fill == Fill::Index) {
    std::vector<int64_t> v(size_t(numel_of(base)));
    for (auto& x : v) x = int64_t(g.uniform() * double(s.bound)) % std::max<int64_t>(s.bound, 1);
    t = Tensor::from_vector(v, base);
  } else {
    t = Tensor::rand(base, g, DType::F64, s.lo, s.hi);
    double* p = t.data<double>();
    const int64_t n = t.numel();
    if (s.fill == Fill::Mask)
      for (int64_t i = 0; i < n; ++i) p[i] = p[i] < 0.5 * (s.lo + s.hi) ? 0.0 : 1.0;
    if (s.fill == Fill::Special) {
      const double special[3] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                                 -std::numeric_limits<double>::infinity()};
      for (int64_t i = 0; i < std::min<int64_t>(n, 3); ++i) p[i] = special[i];
    }
    if (s.fill == Fill::MaskedRow && !base.empty())
      for (int64_t i = 0; i < std::min<int64_t>(n, base.back()); ++i) p[i] = -std::numeric_limits<double>::infinity();
    if (round32)
      for (int64_t i = 0; i < n; ++i) p[i] = double(float(p[i]));
    if (dtype == DType::I64) {  // integer cases: round the uniform values
      for (int64_t i = 0; i < n; ++i) p[i] = std::floor(p[i]);
    }
    t = t.to(dtype);
  }
  t = t.to(device);
  const int64_t nd = t.dim();
  switch (s.layout) {
    case Layout::Contiguous: break;
    case Layout::Transposed: if (nd >= 2) t = t.transpose(-2, -1); break;
    case Layout::Strided: if (nd >= 1) t = t.slice(-1, 0, base.back(), 2); break;
    case Layout::Broadcast0: if (nd >= 1) t = t.expand(s.shape); break;
    case Layout::SwapBatch: if (nd >= 2) t = t.transpose(0, 1); break;
  }
  return t;
}

inline std::vector<Tensor> make_inputs(const OpCase& c, DType dtype, Device device, bool round32 = false,
                                       uint64_t seed = 1) {
  std::vector<Tensor> ts;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    ts.push_back(make_input(c.inputs[i], dtype, device, seed + 7919 * i, round32));
  return ts;
}

// The k::Op a case exercises (OpCase::op is one of k::op_names); fails on an unknown name.
inline k::Op op_of(const OpCase& c) {
  for (size_t i = 0; i < k::num_ops; ++i)
    if (k::op_names[i] == c.op) return k::Op(i);
  fail("backend case '{}': '{}' is not an op of kernels/op_table.inc", c.name, c.op);
}

// Whether dev's backend has a kernel for case c in dtype t (k::supports()).
inline bool supported(const OpCase& c, DType t, Device dev) {
  return k::supports(dev, op_of(c), t);
}

inline bool has_views(const OpCase& c) {
  for (const Input& s : c.inputs)
    if (s.layout != Layout::Contiguous) return true;
  return false;
}

inline std::string shapes_str(const std::vector<Input>& ins) {
  std::string s;
  for (const Input& i : ins) s += (s.empty() ? "" : ", ") + shape_str(i.shape);
  return s;
}

// ------------------------------------------------------------------------ the table

namespace detail {

inline const char* unary_name(k::Unary op) {
  static const char* names[] = {
      "Neg",       "Exp",       "Log",          "Sqrt",        "Rsqrt",    "Abs",           "Sign",
      "Tanh",      "Sigmoid",   "Relu",         "GeluTanh",    "GeluErf",  "Silu",          "Floor",
      "Ceil",      "ReluGrad",  "GeluTanhGrad", "GeluErfGrad", "SiluGrad", "TanhGradFromY", "SigmoidGradFromY",
      "AddScalar", "MulScalar", "PowScalar",    "RPowScalar",  "Clamp",    "ClampMask",     "RoundBF16",
      "RoundFP16"};
  static_assert(sizeof(names) / sizeof(names[0]) == size_t(k::Unary::RoundFP16) + 1, "a name per k::Unary");
  return names[int(op)];
}
inline const char* binary_name(k::Binary op) {
  static const char* names[] = {"Add", "Sub", "Mul", "Div", "Pow", "Maximum", "Minimum", "Eq", "Ne", "Lt", "Le",
                                "Gt", "Ge"};
  return names[int(op)];
}

struct UnarySpec {
  k::Unary op;
  double p, q;
  bool positive;  // domain (0, inf)
  GradFn grad;
};

inline std::vector<UnarySpec> unary_specs() {
  using U = k::Unary;
  auto g1 = [](Variable (*f)(const Variable&)) { return GradFn([f](const std::vector<Variable>& v) { return f(v[0]); }); };
  return {
      {U::Neg, 0, 0, false, g1(&neg)},
      {U::Exp, 0, 0, false, g1(&relpos::exp)},
      {U::Log, 0, 0, true, g1(&relpos::log)},
      {U::Sqrt, 0, 0, true, g1(&relpos::sqrt)},
      {U::Rsqrt, 0, 0, true, g1(&rsqrt)},
      {U::Abs, 0, 0, false, g1(&relpos::abs)},
      {U::Sign, 0, 0, false, nullptr},
      {U::Tanh, 0, 0, false, g1(&relpos::tanh)},
      {U::Sigmoid, 0, 0, false, g1(&sigmoid)},
      {U::Relu, 0, 0, false, g1(&relu)},
      {U::GeluTanh, 0, 0, false, [](const std::vector<Variable>& v) { return gelu(v[0], GeluApprox::Tanh); }},
      {U::GeluErf, 0, 0, false, [](const std::vector<Variable>& v) { return gelu(v[0], GeluApprox::Erf); }},
      {U::Silu, 0, 0, false, g1(&silu)},
      {U::Floor, 0, 0, false, nullptr},
      {U::Ceil, 0, 0, false, nullptr},
      {U::ReluGrad, 0, 0, false, nullptr},
      {U::GeluTanhGrad, 0, 0, false, nullptr},
      {U::GeluErfGrad, 0, 0, false, nullptr},
      {U::SiluGrad, 0, 0, false, nullptr},
      {U::TanhGradFromY, 0, 0, false, nullptr},
      {U::SigmoidGradFromY, 0, 0, false, nullptr},
      {U::AddScalar, 0.5, 0, false, [](const std::vector<Variable>& v) { return add(v[0], 0.5); }},
      {U::MulScalar, -1.5, 0, false, [](const std::vector<Variable>& v) { return mul(v[0], -1.5); }},
      {U::PowScalar, 2.5, 0, true, [](const std::vector<Variable>& v) { return pow(v[0], 2.5); }},
      {U::RPowScalar, 1.7, 0, false, nullptr},
      {U::Clamp, -0.3, 0.4, false, [](const std::vector<Variable>& v) { return clamp(v[0], -0.3, 0.4); }},
      {U::ClampMask, -0.3, 0.4, false, nullptr},
      {U::RoundBF16, 0, 0, false, nullptr},
      {U::RoundFP16, 0, 0, false, nullptr},
  };
}

inline void add_elementwise(std::vector<OpCase>& cs) {
  for (const UnarySpec& u : unary_specs()) {
    const std::string nm = std::string("unary ") + unary_name(u.op);
    auto mk = [&](Shape s, Layout l) { return u.positive ? pos(std::move(s), l) : in(std::move(s), l); };
    RunFn run = [u](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::unary(u.op, x[0], u.p, u.q)}; };
    cs.push_back({nm + " [3, 17]", "unary", {mk({3, 17}, Layout::Contiguous)}, run});
    cs.back().grad = u.grad;
    cs.push_back({nm + " [17, 3] transposed", "unary", {mk({17, 3}, Layout::Transposed)}, run});
    cs.push_back({nm + " [] 0-d", "unary", {mk({}, Layout::Contiguous)}, run});
    cs.push_back({nm + " [0, 3]", "unary", {mk({0, 3}, Layout::Contiguous)}, run});
    // CUDA collapses the dims of contiguous operands into one (no div/mod per element)
    cs.push_back({nm + " [2, 3, 4, 5] contiguous (1-d launch)", "unary", {mk({2, 3, 4, 5}, Layout::Contiguous)}, run});
    // unary_grad: g * deriv(x)
    RunFn rg = [u](const std::vector<Tensor>& x, Device) {
      return std::vector<Tensor>{k::unary_grad(u.op, x[0], x[1], u.p, u.q)};
    };
    cs.push_back({"unary_grad " + std::string(unary_name(u.op)) + " [257] strided g", "unary_grad",
                  {in({257}, Layout::Strided), mk({257}, Layout::Contiguous)}, rg});
  }
  // NaN / Inf propagation
  for (k::Unary op : {k::Unary::Exp, k::Unary::Tanh, k::Unary::Neg, k::Unary::Sigmoid}) {
    cs.push_back({std::string("unary ") + unary_name(op) + " NaN/Inf [5]", "unary",
                  {Input{{5}, Layout::Contiguous, Fill::Special}},
                  [op](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::unary(op, x[0])}; }});
    cs.back().nan_expected = true;
  }

  using B = k::Binary;
  for (int o = 0; o <= int(B::Ge); ++o) {
    const B op = B(o);
    const std::string nm = std::string("binary ") + binary_name(op);
    const bool positive = op == B::Pow || op == B::Div;
    auto mk = [&](Shape s, Layout l) { return positive ? pos(std::move(s), l) : in(std::move(s), l); };
    RunFn run = [op](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::binary(op, x[0], x[1])}; };
    GradFn grad;
    if (op == B::Add) grad = [](const std::vector<Variable>& v) { return add(v[0], v[1]); };
    if (op == B::Sub) grad = [](const std::vector<Variable>& v) { return sub(v[0], v[1]); };
    if (op == B::Mul) grad = [](const std::vector<Variable>& v) { return mul(v[0], v[1]); };
    if (op == B::Div) grad = [](const std::vector<Variable>& v) { return div(v[0], v[1]); };
    if (op == B::Pow) grad = [](const std::vector<Variable>& v) { return pow(v[0], v[1]); };
    cs.push_back({nm + " [3, 17] + [3, 17]", "binary", {mk({3, 17}, Layout::Contiguous), mk({3, 17}, Layout::Contiguous)}, run});
    cs.back().grad = grad;
    cs.push_back({nm + " [3, 17] + [17] broadcast", "binary", {mk({3, 17}, Layout::Contiguous), mk({17}, Layout::Contiguous)}, run});
    cs.back().grad = grad;
    cs.push_back({nm + " [4, 1, 5] + [3, 1] broadcast", "binary", {mk({4, 1, 5}, Layout::Contiguous), mk({3, 1}, Layout::Contiguous)}, run});
    cs.push_back({nm + " transposed + broadcast0", "binary", {mk({17, 3}, Layout::Transposed), mk({17, 3}, Layout::Broadcast0)}, run});
    cs.push_back({nm + " [] + [5]", "binary", {mk({}, Layout::Contiguous), mk({5}, Layout::Contiguous)}, run});
    cs.push_back({nm + " [0, 3] + [3]", "binary", {mk({0, 3}, Layout::Contiguous), mk({3}, Layout::Contiguous)}, run});
    // CUDA dim collapsing: all contiguous (1-d), a middle broadcast dim (dims kept apart),
    // leading size-1 dims dropped
    cs.push_back({nm + " [2, 3, 4, 5] + [2, 3, 4, 5] (1-d launch)",
                  "binary",
                  {mk({2, 3, 4, 5}, Layout::Contiguous), mk({2, 3, 4, 5}, Layout::Contiguous)},
                  run});
    cs.push_back({nm + " [4, 5, 6] + [4, 1, 6] (partial collapse)",
                  "binary",
                  {mk({4, 5, 6}, Layout::Contiguous), mk({4, 1, 6}, Layout::Contiguous)},
                  run});
    cs.push_back({nm + " [1, 1, 7, 3] + [7, 3] (size-1 dims)",
                  "binary",
                  {mk({1, 1, 7, 3}, Layout::Contiguous), mk({7, 3}, Layout::Contiguous)},
                  run});
  }
  for (B op : {B::Add, B::Sub, B::Mul, B::Maximum, B::Minimum, B::Lt, B::Eq}) {
    cs.push_back({std::string("binary ") + binary_name(op) + " int64 [3, 17] + [17]", "binary",
                  {Input{{3, 17}, Layout::Contiguous, Fill::Uniform, -20, 20}, Input{{17}, Layout::Strided, Fill::Uniform, -20, 20}},
                  [op](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::binary(op, x[0], x[1])}; }});
    cs.back().dtypes = {DType::I64};
    cs.back().exact = true;
  }
  cs.push_back({"binary Div int64 [3, 17] / [17]", "binary",
                {Input{{3, 17}, Layout::Contiguous, Fill::Uniform, -50, 50}, Input{{17}, Layout::Contiguous, Fill::Uniform, 1, 9}},
                [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::div(x[0], x[1])}; }});
  cs.back().dtypes = {DType::I64};
  cs.back().exact = true;
  cs.push_back({"binary Add NaN/Inf [5] + [5]", "binary",
                {Input{{5}, Layout::Contiguous, Fill::Special}, in({5})},
                [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::add(x[0], x[1])}; }});
  cs.back().nan_expected = true;

  RunFn where_run = [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::where(x[0], x[1], x[2])}; };
  cs.push_back({"where [3, 1] ? [3, 17] : [17]", "where",
                {Input{{3, 1}, Layout::Contiguous, Fill::Mask}, in({3, 17}), in({17})}, where_run});
  cs.back().grad = [](const std::vector<Variable>& v) { return where(v[0].data(), v[1], v[2]); };
  cs.push_back({"where strided ? transposed : 0-d", "where",
                {Input{{17, 3}, Layout::Strided, Fill::Mask}, in({17, 3}, Layout::Transposed), in({})}, where_run});
  cs.push_back({"where [0, 2]", "where", {Input{{0, 2}, Layout::Contiguous, Fill::Mask}, in({0, 2}), in({2})}, where_run});

  for (auto [qo, ko] : std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {2, 0}, {0, 3}}) {
    const std::string nm = "causal_fill q" + std::to_string(qo) + " k" + std::to_string(ko);
    RunFn run = [qo = qo, ko = ko](const std::vector<Tensor>& x, Device) {
      return std::vector<Tensor>{k::causal_fill(x[0], qo, ko, -1e9)};
    };
    cs.push_back({nm + " [2, 3, 5, 7]", "causal_fill", {in({2, 3, 5, 7})}, run});
    // (a moderate fill value: with -1e9 in the loss, central differences lose every digit)
    cs.back().grad = [qo = qo, ko = ko](const std::vector<Variable>& v) { return causal_fill(v[0], qo, ko, -3.0); };
    cs.push_back({nm + " [7, 5] transposed", "causal_fill", {in({7, 5}, Layout::Transposed)}, run});
  }
  cs.push_back({"causal_fill [0, 4]", "causal_fill", {in({0, 4})},
                [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::causal_fill(x[0], 0, 0, 0.0)}; }});

  cs.push_back({"add_ strided dst += 0.5 [17]", "add_", {in({3, 17}, Layout::Strided), in({17})},
                [](const std::vector<Tensor>& x, Device) {
                  k::add_(x[0], x[1], 0.5);
                  return std::vector<Tensor>{x[0]};
                }});
  cs.push_back({"add_ [4, 3] += [1, 3] broadcast", "add_", {in({4, 3}), in({1, 3})},
                [](const std::vector<Tensor>& x, Device) {
                  k::add_(x[0], x[1], -2.0);
                  return std::vector<Tensor>{x[0]};
                }});
  cs.push_back({"mul_ transposed dst", "mul_", {in({17, 5}, Layout::Transposed)},
                [](const std::vector<Tensor>& x, Device) {
                  k::mul_(x[0], 1.25);
                  return std::vector<Tensor>{x[0]};
                }});
  cs.push_back({"mul_ 0-d", "mul_", {in({})}, [](const std::vector<Tensor>& x, Device) {
                  k::mul_(x[0], -3.0);
                  return std::vector<Tensor>{x[0]};
                }});
}

inline void add_reductions(std::vector<OpCase>& cs) {
  using R = k::Reduce;
  const char* names[] = {"Sum", "Mean", "Max", "Min", "LogSumExp", "Var"};
  for (int o = 0; o <= int(R::Var); ++o) {
    const R op = R(o);
    const std::string nm = std::string("reduce ") + names[o];
    auto mk = [op](std::vector<int64_t> dims, bool keepdim, int64_t corr = 1) {
      return RunFn([=](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::reduce(op, x[0], dims, keepdim, corr)}; });
    };
    GradFn grad;
    if (op == R::Sum) grad = [](const std::vector<Variable>& v) { return sum(v[0], {1}); };
    if (op == R::Mean) grad = [](const std::vector<Variable>& v) { return mean(v[0], {1}); };
    if (op == R::Max) grad = [](const std::vector<Variable>& v) { return max(v[0], {1}); };
    if (op == R::LogSumExp) grad = [](const std::vector<Variable>& v) { return logsumexp(v[0], {1}); };
    if (op == R::Var) grad = [](const std::vector<Variable>& v) { return var(v[0], {1}); };
    cs.push_back({nm + " [3, 17, 5] dim 1", "reduce", {in({3, 17, 5})}, mk({1}, false)});
    cs.back().grad = grad;
    cs.push_back({nm + " [3, 17, 5] dims 0, 2 keepdim", "reduce", {in({3, 17, 5})}, mk({0, 2}, true)});
    cs.push_back({nm + " [257] all", "reduce", {in({257})}, mk({}, false)});
    cs.push_back({nm + " [5, 17] transposed dim 0", "reduce", {in({5, 17}, Layout::Transposed)}, mk({0}, false)});
    cs.push_back({nm + " [] 0-d", "reduce", {in({})}, mk({}, true)});
    cs.push_back({nm + " [1, 3] dim 0", "reduce", {in({1, 3})}, mk({0}, false)});
    cs.push_back({nm + " [4, 3] broadcast0 dim -1", "reduce", {in({4, 3}, Layout::Broadcast0)}, mk({-1}, false)});
    cs.push_back({nm + " [0, 3] dim 1", "reduce", {in({0, 3})}, mk({1}, false)});
    if (op == R::Sum || op == R::Mean) {
      cs.push_back({nm + " [0, 3] dim 0", "reduce", {in({0, 3})}, mk({0}, false)});
      // CUDA: leading dims of a contiguous tensor as column sums (chunks of 64 rows), a large
      // full reduction in two passes (chunks of 8192)
      cs.push_back({nm + " [150, 7] dim 0 (column sums)", "reduce", {in({150, 7})}, mk({0}, false)});
      cs.push_back(
          {nm + " [3, 50, 2, 3] dims 0, 1 keepdim (column sums)", "reduce", {in({3, 50, 2, 3})}, mk({0, 1}, true)});
      cs.push_back({nm + " [20001] all (two passes)", "reduce", {in({20001})}, mk({}, false)});
    }
    if (op == R::Var) cs.push_back({nm + " correction 0 [3, 17]", "reduce", {in({3, 17})}, mk({1}, false, 0)});
    if (op == R::Sum || op == R::Max || op == R::LogSumExp) {
      cs.push_back({nm + " NaN/Inf [5]", "reduce", {Input{{5}, Layout::Contiguous, Fill::Special}}, mk({}, false)});
      cs.back().nan_expected = op == R::Sum;  // max (and so logsumexp) skips NaN, as std::max does on the CPU
    }
  }
  RunFn ss = [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::sum_squares(x[0])}; };
  cs.push_back({"sum_squares [257]", "sum_squares", {in({257})}, ss});
  cs.push_back({"sum_squares [3, 17] strided", "sum_squares", {in({3, 17}, Layout::Strided)}, ss});
  cs.push_back({"sum_squares [0]", "sum_squares", {in({0})}, ss});
  cs.push_back({"sum_squares [20000] (several chunks)", "sum_squares", {in({20000})}, ss});
  cs.push_back({"sum_squares NaN/Inf [5]", "sum_squares", {Input{{5}, Layout::Contiguous, Fill::Special}}, ss});
  cs.back().nan_expected = true;
}

inline void add_matmul(std::vector<OpCase>& cs) {
  RunFn mm = [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::matmul(x[0], x[1])}; };
  GradFn g = [](const std::vector<Variable>& v) { return matmul(v[0], v[1]); };
  auto add = [&](std::string nm, Input a, Input b, bool with_grad = false) {
    cs.push_back({"matmul " + nm, "matmul", {a, b}, mm});
    cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
    if (with_grad) cs.back().grad = g;
  };
  add("[3, 17] @ [17, 5]", in({3, 17}), in({17, 5}), true);
  add("a transposed", in({3, 17}, Layout::Transposed), in({17, 5}));
  add("b transposed", in({3, 17}), in({17, 5}, Layout::Transposed));
  add("both transposed", in({3, 17}, Layout::Transposed), in({17, 5}, Layout::Transposed));
  add("a strided (packed)", in({3, 17}, Layout::Strided), in({17, 5}));
  add("[2, 3, 4] @ [4, 5] (folded)", in({2, 3, 4}), in({4, 5}), true);
  add("[2, 3, 4] @ [2, 4, 5] batched", in({2, 3, 4}), in({2, 4, 5}), true);
  add("[3, 4] @ [2, 4, 5] a broadcast", in({3, 4}), in({2, 4, 5}));
  add("[2, 1, 3, 4] @ [3, 4, 5] broadcast", in({2, 1, 3, 4}), in({3, 4, 5}));
  add("[3, 2, 3, 4] swapped batch @ [4, 5]", in({3, 2, 3, 4}, Layout::SwapBatch), in({4, 5}));
  add("[3, 2, 3, 4] swapped batch @ [3, 2, 4, 5]", in({3, 2, 3, 4}, Layout::SwapBatch), in({3, 2, 4, 5}));
  add("[3, 0] @ [0, 4] (K = 0)", in({3, 0}), in({0, 4}));
  add("[0, 3] @ [3, 4] (M = 0)", in({0, 3}), in({3, 4}));
  add("[1, 17] @ [17, 1]", in({1, 17}), in({17, 1}));
  add("[257, 3] @ [3, 17]", in({257, 3}), in({3, 17}));
  add("[2, 33, 65] @ [2, 65, 17]", in({2, 33, 65}), in({2, 65, 17}));
  // The bias epilogue (a linear layer): out + bias [N] on every row, batched or folded.
  RunFn mmb = [](const std::vector<Tensor>& x, Device) {
    return std::vector<Tensor>{k::matmul(x[0], x[1], k::GemmInputs::F32, false, x[2])};
  };
  GradFn gl = [](const std::vector<Variable>& v) { return linear(v[0], transpose(v[1], 0, 1), v[2]); };
  auto add_b = [&](std::string nm, Input a, Input b, Input bias, bool with_grad) {
    cs.push_back({"matmul + bias " + nm, "matmul", {a, b, bias}, mmb});
    cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
    if (with_grad) cs.back().grad = gl;
  };
  add_b("[3, 17] @ [17, 5]", in({3, 17}), in({17, 5}), in({5}), true);
  add_b("[2, 3, 4] @ [4, 5] (folded)", in({2, 3, 4}), in({4, 5}), in({5}), true);
  add_b("[2, 3, 4] @ [2, 4, 5] batched", in({2, 3, 4}), in({2, 4, 5}), in({5}), false);
  add_b("b transposed, bias strided", in({3, 17}), in({17, 5}, Layout::Transposed), in({5}, Layout::Strided), false);
  add_b("[3, 0] @ [0, 4] (K = 0)", in({3, 0}), in({0, 4}), in({4}), false);
  // The activation epilogue (a linear layer and its activation): act(out + bias) and act'.
  for (k::Unary act : {k::Unary::GeluErf, k::Unary::GeluTanh, k::Unary::Relu, k::Unary::Silu}) {
    const std::string an = act == k::Unary::GeluErf    ? "gelu"
                           : act == k::Unary::GeluTanh ? "gelu_tanh"
                           : act == k::Unary::Relu     ? "relu"
                                                       : "silu";
    RunFn ma = [act](const std::vector<Tensor>& x, Device) {
      const k::MatmulActOut o = k::matmul_act(x[0], x[1], k::GemmInputs::F32, false, x[2], act, true);
      return std::vector<Tensor>{o.y, o.act_grad};
    };
    cs.push_back(
        {"matmul_act " + an + " [2, 3, 4] @ [4, 5] + bias", "matmul_act", {in({2, 3, 4}), in({4, 5}), in({5})}, ma});
    cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
    cs.back().grad = [act](const std::vector<Variable>& v) { return linear(v[0], transpose(v[1], 0, 1), v[2], act); };
  }
  RunFn ma_t = [](const std::vector<Tensor>& x, Device) {
    const k::MatmulActOut o = k::matmul_act(x[0], x[1], k::GemmInputs::F32, false, Tensor(), k::Unary::GeluErf, false);
    return std::vector<Tensor>{o.y};
  };
  cs.push_back({"matmul_act gelu b transposed, batched, no bias, no derivative",
                "matmul_act",
                {in({2, 3, 17}), in({2, 17, 5}, Layout::Transposed)},
                ma_t});
  cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
  cs.push_back({"matmul_act gelu (K = 0)",
                "matmul_act",
                {in({3, 0}), in({0, 4}), in({4})},
                [](const std::vector<Tensor>& x, Device) {
                  const k::MatmulActOut o =
                      k::matmul_act(x[0], x[1], k::GemmInputs::F32, false, x[2], k::Unary::GeluErf, true);
                  return std::vector<Tensor>{o.y, o.act_grad};
                }});
  // The multiplier epilogue (the backward of a linear layer through an activation).
  const RunFn mmul = [](const std::vector<Tensor>& x, Device) {
    return std::vector<Tensor>{k::matmul_mul(x[0], x[1], k::GemmInputs::F32, false, x[2])};
  };
  cs.push_back(
      {"matmul_mul [2, 3, 4] @ [4, 5] * [2, 3, 5]", "matmul_mul", {in({2, 3, 4}), in({4, 5}), in({2, 3, 5})}, mmul});
  cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
  cs.push_back({"matmul_mul b transposed, batched, multiplier strided",
                "matmul_mul",
                {in({2, 3, 17}), in({2, 17, 5}, Layout::Transposed), in({2, 3, 5}, Layout::Strided)},
                mmul});
  cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
  cs.push_back({"matmul_mul (K = 0)", "matmul_mul", {in({3, 0}), in({0, 4}), in({3, 4})}, mmul});
  // The addend epilogue (a residual around a linear layer).
  const RunFn madd = [](const std::vector<Tensor>& x, Device) {
    return std::vector<Tensor>{k::matmul_add(x[0], x[1], k::GemmInputs::F32, false, x[2], x[3])};
  };
  cs.push_back({"matmul_add [2, 3, 4] @ [4, 5] + bias + [2, 3, 5]",
                "matmul_add",
                {in({2, 3, 4}), in({4, 5}), in({5}), in({2, 3, 5})},
                madd});
  cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
  cs.back().grad = [](const std::vector<Variable>& v) { return linear(v[0], transpose(v[1], 0, 1), v[2], v[3]); };
  cs.push_back({"matmul_add b transposed, batched, addend strided, no bias",
                "matmul_add",
                {in({2, 3, 17}), in({2, 17, 5}, Layout::Transposed), in({2, 3, 5}, Layout::Strided)},
                [](const std::vector<Tensor>& x, Device) {
                  return std::vector<Tensor>{k::matmul_add(x[0], x[1], k::GemmInputs::F32, false, Tensor(), x[2])};
                }});
  cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
  cs.push_back({"matmul_add (K = 0)", "matmul_add", {in({3, 0}), in({0, 4}), in({4}), in({3, 4})}, madd});
  // The product and a's sums along K (a linear layer's dW = g^T x and db): a transposed with K past
  // the CPU's 1024 chunk, a row-major, and the empty cases.
  const RunFn msum = [](const std::vector<Tensor>& x, Device) {
    const k::MatmulSumsOut o = k::matmul_sums(x[0], x[1], k::GemmInputs::F32, false);
    return std::vector<Tensor>{o.y, o.a_sums};
  };
  cs.push_back({"matmul_sums a transposed [5, 1100] @ [1100, 3]",
                "matmul_sums",
                {in({5, 1100}, Layout::Transposed), in({1100, 3})},
                msum});
  cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-4;
  cs.push_back({"matmul_sums [4, 7] @ [7, 6] (b transposed)",
                "matmul_sums",
                {in({4, 7}), in({7, 6}, Layout::Transposed)},
                msum});
  cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
  cs.push_back({"matmul_sums (K = 0)", "matmul_sums", {in({3, 0}), in({0, 4})}, msum});
  cs.push_back({"matmul_sums (N = 0)", "matmul_sums", {in({3, 5}), in({5, 0})}, msum});
  cs.push_back({"matmul NaN/Inf", "matmul", {Input{{2, 3}, Layout::Contiguous, Fill::Special}, in({3, 2})}, mm});
  cs.back().nan_expected = true;
  // Attention on split heads: q [B, L, H, dh] viewed as [B, H, L, dh], k viewed as
  // [B, H, dh, L]: batch offsets not one stride apart (CUDA: one strided-batched GEMM per b).
  cs.push_back({"matmul split heads [2, 3, 5, 4] @ [2, 3, 4, 6]",
                "matmul",
                {in({2, 5, 3, 4}), in({2, 6, 3, 4})},
                [](const std::vector<Tensor>& x, Device) {
                  return std::vector<Tensor>{k::matmul(x[0].permute({0, 2, 1, 3}), x[1].permute({0, 2, 3, 1}))};
                }});
  cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
  cs.push_back({"matmul split heads, 3 batch dims [2, 2, 3, 5, 4] @ [4, 5]",
                "matmul",
                {in({2, 5, 2, 3, 4}), in({4, 5})},
                [](const std::vector<Tensor>& x, Device) {
                  return std::vector<Tensor>{k::matmul(x[0].permute({0, 2, 3, 1, 4}), x[1])};
                }});
  cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
}

inline void add_softmax(std::vector<OpCase>& cs) {
  auto sm = [](int64_t dim, bool log) {
    return RunFn([=](const std::vector<Tensor>& x, Device) {
      return std::vector<Tensor>{log ? k::log_softmax(x[0], dim) : k::softmax(x[0], dim)};
    });
  };
  auto bw = [](int64_t dim, bool log) {
    return RunFn([=](const std::vector<Tensor>& x, Device) {
      Tensor y = log ? k::log_softmax(x[0], dim) : k::softmax(x[0], dim);
      return std::vector<Tensor>{log ? k::log_softmax_backward(y, x[1], dim) : k::softmax_backward(y, x[1], dim)};
    });
  };
  for (bool log : {false, true}) {
    const std::string nm = log ? "log_softmax" : "softmax";
    cs.push_back({nm + " [3, 17] dim -1", nm, {in({3, 17})}, sm(-1, log)});
    cs.back().grad = [log](const std::vector<Variable>& v) { return log ? log_softmax(v[0], -1) : softmax(v[0], -1); };
    cs.push_back({nm + " [3, 17] dim 0", nm, {in({3, 17})}, sm(0, log)});
    cs.push_back({nm + " [2, 3, 5] dim 1 transposed", nm, {in({2, 3, 5}, Layout::Transposed)}, sm(1, log)});
    cs.push_back({nm + " [257] dim 0", nm, {in({257})}, sm(0, log)});
    cs.push_back({nm + " [] 0-d", nm, {in({})}, sm(0, log)});
    cs.push_back({nm + " [0, 3] dim -1", nm, {in({0, 3})}, sm(-1, log)});
    cs.push_back({nm + " [3, 0] dim -1", nm, {in({3, 0})}, sm(-1, log)});
    cs.push_back({nm + " [4, 3] broadcast0", nm, {in({4, 3}, Layout::Broadcast0)}, sm(-1, log)});
    cs.push_back({nm + "_backward [3, 17] dim -1", nm + "_backward", {in({3, 17}), in({3, 17})}, bw(-1, log)});
    cs.push_back({nm + "_backward [5, 17] dim 0 strided", nm + "_backward", {in({5, 17}), in({5, 17}, Layout::Strided)}, bw(0, log)});
    cs.push_back({nm + "_backward [1] dim 0", nm + "_backward", {in({1}), in({1})}, bw(0, log)});
    cs.push_back({nm + " NaN/Inf row [2, 5]", nm, {Input{{2, 5}, Layout::Contiguous, Fill::Special}}, sm(-1, log)});
    cs.back().nan_expected = true;
  }
  cs.push_back({"softmax fully masked row [2, 5]", "softmax", {Input{{2, 5}, Layout::Contiguous, Fill::MaskedRow}}, sm(-1, false)});
}

inline void add_norms(std::vector<OpCase>& cs) {
  for (bool rms : {false, true}) {
    const std::string nm = rms ? "rms_norm" : "layer_norm";
    auto fwd = [rms](bool w, bool b) {
      return RunFn([=](const std::vector<Tensor>& x, Device) {
        k::NormOut o = rms ? k::rms_norm(x[0], w ? x[1] : Tensor(), 1e-5)
                           : k::layer_norm(x[0], w ? x[1] : Tensor(), b ? x[2] : Tensor(), 1e-5);
        return rms ? std::vector<Tensor>{o.y, o.rstd} : std::vector<Tensor>{o.y, o.mean, o.rstd};
      });
    };
    auto bwd = [rms](bool w, bool b) {
      return RunFn([=](const std::vector<Tensor>& x, Device) {
        // inputs: x, gy, weight, bias
        Tensor wt = w ? x[2] : Tensor();
        k::NormOut o = rms ? k::rms_norm(x[0], wt, 1e-5) : k::layer_norm(x[0], wt, b ? x[3] : Tensor(), 1e-5);
        k::NormGrads g = rms ? k::rms_norm_backward(x[1], x[0], o.rstd, wt)
                             : k::layer_norm_backward(x[1], x[0], o.mean, o.rstd, wt, b);
        std::vector<Tensor> out{g.dx};
        if (g.dweight.defined()) out.push_back(g.dweight);
        if (g.dbias.defined()) out.push_back(g.dbias);
        return out;
      });
    };
    cs.push_back({nm + " [3, 17] + weight, bias", nm, {in({3, 17}), in({17}), in({17})}, fwd(true, true)});
    cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
    cs.back().grad = [rms](const std::vector<Variable>& v) {
      return rms ? rms_norm(v[0], v[1], 1e-5) : layer_norm(v[0], v[1], v[2], 1e-5);
    };
    cs.push_back({nm + " [2, 3, 257] no weight", nm, {in({2, 3, 257})}, fwd(false, false)});
    cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
    cs.push_back({nm + " [5, 1] D = 1", nm, {in({5, 1}), in({1}), in({1})}, fwd(true, true)});
    cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
    cs.push_back({nm + " [3, 17] transposed", nm, {in({3, 17}, Layout::Transposed), in({17}, Layout::Strided), in({17})}, fwd(true, true)});
    cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
    cs.push_back({nm + " [0, 5]", nm, {in({0, 5}), in({5}), in({5})}, fwd(true, true)});
    cs.push_back({nm + "_backward [3, 17] weight, bias", nm + "_backward", {in({3, 17}), in({3, 17}), in({17}), in({17})}, bwd(true, true)});
    cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
    cs.push_back({nm + "_backward [33, 257] weight", nm + "_backward", {in({33, 257}), in({33, 257}), in({257}), in({257})}, bwd(true, false)});
    cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-4;
    cs.push_back({nm + "_backward [4, 5] no weight, strided gy", nm + "_backward", {in({4, 5}), in({4, 5}, Layout::Strided), in({5}), in({5})}, bwd(false, false)});
    cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
    // weight and bias gradients over several row chunks of 64 (the last one partial): CUDA
    // sums each chunk in parallel, then the chunks in order, as the CPU
    cs.push_back({nm + "_backward [3, 50, 9] weight, bias (row chunks)",
                  nm + "_backward",
                  {in({3, 50, 9}), in({3, 50, 9}), in({9}), in({9})},
                  bwd(true, true)});
    cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-4;
  }
}

inline void add_indexing(std::vector<OpCase>& cs) {
  cs.push_back({"embedding [11, 7] idx [3, 5]", "embedding", {in({11, 7}), idx({3, 5}, 11)},
                [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::embedding(x[0], x[1])}; }});
  cs.back().exact = true;
  cs.back().grad = [](const std::vector<Variable>& v) { return embedding(v[0], v[1].data()); };
  cs.push_back({"embedding transposed weight, idx [0]", "embedding", {in({11, 7}, Layout::Transposed), idx({0}, 11)},
                [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::embedding(x[0], x[1])}; }});
  cs.back().exact = true;
  for (int64_t rows : {11, 3}) {
    cs.push_back({"embedding_backward gy [3, 5, 7] rows " + std::to_string(rows), "embedding_backward",
                  {in({3, 5, 7}), idx({3, 5}, rows)},
                  [rows](const std::vector<Tensor>& x, Device) {
                    return std::vector<Tensor>{k::embedding_backward(x[0], x[1], rows)};
                  }});
    cs.back().exact = true;
  }
  cs.push_back({"embedding_backward strided gy [40, 3]", "embedding_backward", {in({40, 3}, Layout::Strided), idx({40}, 4)},
                [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::embedding_backward(x[0], x[1], 4)}; }});
  cs.back().exact = true;
  for (int64_t dim : {0, 1, -1}) {
    const std::string d = " dim " + std::to_string(dim);
    cs.push_back({"index_select [5, 7, 3]" + d, "index_select", {in({5, 7, 3}), idx({9}, dim == 0 ? 5 : dim == 1 ? 7 : 3)},
                  [dim](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::index_select(x[0], dim, x[1])}; }});
    cs.back().exact = true;
    cs.back().grad = [dim](const std::vector<Variable>& v) { return index_select(v[0], dim, v[1].data()); };
    Shape src{5, 7, 3};
    src[size_t(dim < 0 ? dim + 3 : dim)] = 9;
    Shape out{5, 7, 3};
    cs.push_back({"index_add [5, 7, 3]" + d, "index_add", {in(src), idx({9}, out[size_t(dim < 0 ? dim + 3 : dim)])},
                  [dim, out](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::index_add(out, dim, x[1], x[0])}; }});
    cs.back().exact = true;
  }
  cs.push_back({"index_select int64 x [5, 4] dim 1", "index_select",
                {Input{{5, 4}, Layout::Transposed, Fill::Uniform, -20, 20}, idx({6}, 4)},
                [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::index_select(x[0], 1, x[1])}; }});
  cs.back().dtypes = {DType::I64};
  cs.back().exact = true;
  cs.push_back({"index_select transposed x", "index_select", {in({7, 5}, Layout::Transposed), idx({4}, 7)},
                [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::index_select(x[0], 0, x[1])}; }});
  cs.back().exact = true;
  for (int64_t dim : {0, 1}) {
    const std::string d = " dim " + std::to_string(dim);
    cs.push_back({"gather [4, 6] idx [4, 3]" + d, "gather", {in({4, 6}), idx({4, 3}, dim == 0 ? 4 : 6)},
                  [dim](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::gather(x[0], dim, x[1])}; }});
    cs.back().exact = true;
    cs.back().grad = [dim](const std::vector<Variable>& v) { return gather(v[0], dim, v[1].data()); };
    cs.push_back({"scatter_add [4, 6] idx [4, 3]" + d, "scatter_add", {in({4, 3}), idx({4, 3}, dim == 0 ? 4 : 6)},
                  [dim](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::scatter_add({4, 6}, dim, x[1], x[0])}; }});
    cs.back().exact = true;
    cs.back().grad = [dim](const std::vector<Variable>& v) { return scatter_add({4, 6}, dim, v[1].data(), v[0]); };
  }
  cs.push_back({"gather transposed x [3, 8, 5] dim 2", "gather", {in({3, 8, 5}, Layout::Transposed), idx({3, 8, 2}, 5)},
                [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::gather(x[0], 2, x[1])}; }});
  cs.back().exact = true;
  cs.push_back({"scatter_add [3, 8, 5] idx [2, 8, 2] dim 2 (many duplicates)", "scatter_add", {in({2, 8, 2}), idx({2, 8, 2}, 2)},
                [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::scatter_add({3, 8, 5}, 2, x[1], x[0])}; }});
  cs.back().exact = true;
  // The CUDA scatter-adds sort on the device (kernels/cuda/index.cu: keys, radix sort over
  // the bits of the segment count, segment bounds): many mostly empty segments, long runs,
  // a transposed index.
  cs.push_back({"embedding_backward idx [600] rows 70000 (sort over 17 bits)",
                "embedding_backward",
                {in({600, 3}), idx({600}, 70000)},
                [](const std::vector<Tensor>& x, Device) {
                  return std::vector<Tensor>{k::embedding_backward(x[0], x[1], 70000)};
                }});
  cs.back().exact = true;
  cs.push_back({"index_add [2, 3, 4] dim 1 idx [1000] (long segments)",
                "index_add",
                {in({2, 1000, 4}), idx({1000}, 3)},
                [](const std::vector<Tensor>& x, Device) {
                  return std::vector<Tensor>{k::index_add({2, 3, 4}, 1, x[1], x[0])};
                }});
  cs.back().exact = true;
  cs.push_back({"scatter_add [6, 9] transposed idx [5, 7] dim 1",
                "scatter_add",
                {in({5, 7}), Input{{5, 7}, Layout::Transposed, Fill::Index, 0, 0, 9}},
                [](const std::vector<Tensor>& x, Device) {
                  return std::vector<Tensor>{k::scatter_add({6, 9}, 1, x[1], x[0])};
                }});
  cs.back().exact = true;
}

inline void add_misc(std::vector<OpCase>& cs) {
  for (auto [B, H, Lq, Lk] : std::vector<std::array<int64_t, 4>>{{2, 3, 5, 7}, {1, 2, 1, 17}, {2, 1, 6, 1}}) {
    const std::string s = " [" + std::to_string(B) + ", " + std::to_string(H) + ", " + std::to_string(Lq) + ", " +
                          std::to_string(Lk) + "]";
    cs.push_back({"toeplitz_add" + s, "toeplitz_add", {in({B, H, Lq, Lk}), in({H, Lq + Lk - 1})},
                  [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::toeplitz_add(x[0], x[1])}; }});
    cs.back().exact = true;
    cs.back().grad = [](const std::vector<Variable>& v) { return add_toeplitz_bias(v[0], v[1]); };
    cs.push_back({"toeplitz_diag_sum" + s, "toeplitz_diag_sum", {in({B, H, Lq, Lk})},
                  [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::toeplitz_diag_sum(x[0])}; }});
    cs.back().exact = true;
  }
  // rotary: x [B, H, L, dh] with r = 2 half rotated channels; cs any values (scales folded in)
  for (auto [dh, half, interleaved] : std::vector<std::tuple<int64_t, int64_t, bool>>{
           {8, 4, false}, {8, 4, true}, {10, 3, false}, {6, 2, true}, {4, 0, false}}) {
    const bool inter = interleaved;  // a variable the lambdas can capture (clang 14: no bindings)
    const std::string s = " [2, 3, 5, " + std::to_string(dh) + "] r " + std::to_string(2 * half) +
                          (inter ? " interleaved" : " half");
    for (bool inverse : {false, true}) {
      cs.push_back({"rotary" + s + (inverse ? " inverse" : ""), "rotary", {in({2, 3, 5, dh}), cst({2, 5, half})},
                    [inter, inverse](const std::vector<Tensor>& x, Device) {
                      return std::vector<Tensor>{k::rotary(x[0], x[1], inter, inverse)};
                    }});
    }
    cs.back().grad = [inter](const std::vector<Variable>& v) { return rotary(v[0], v[1].data(), inter); };
  }
  // depthwise_conv2d: x [B, H, W, C], w [C, k, k], bias [C] (or none); grids with an edge of 1
  // and kernels larger than the grid (every tap but the centre falls in the zero padding).
  for (auto [B, H, W, C, K, bias] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool>>{
           {2, 3, 4, 5, 3, true}, {1, 5, 5, 2, 5, false}, {2, 1, 6, 3, 3, true}, {1, 2, 2, 4, 5, true},
           {3, 4, 3, 2, 1, false}}) {
    const bool with_bias = bias;
    const std::string s = " [" + std::to_string(B) + ", " + std::to_string(H) + ", " + std::to_string(W) + ", " +
                          std::to_string(C) + "] k " + std::to_string(K) + (with_bias ? " bias" : "");
    std::vector<Input> ins{in({B, H, W, C}), in({C, K, K})};
    if (with_bias) ins.push_back(in({C}));
    cs.push_back({"depthwise_conv2d" + s, "depthwise_conv2d", ins, [with_bias](const std::vector<Tensor>& x, Device) {
                    return std::vector<Tensor>{k::depthwise_conv2d(x[0], x[1], with_bias ? x[2] : Tensor())};
                  }});
    cs.back().exact = true;
    cs.back().grad = [with_bias](const std::vector<Variable>& v) {
      return depthwise_conv2d(v[0], v[1], with_bias ? v[2] : Variable());
    };
    std::vector<Input> bins{in({B, H, W, C}), in({B, H, W, C}), in({C, K, K})};
    cs.push_back({"depthwise_conv2d_backward" + s, "depthwise_conv2d_backward", bins,
                  [with_bias](const std::vector<Tensor>& x, Device) {
                    k::ConvGrads g = k::depthwise_conv2d_backward(x[0], x[1], x[2], with_bias);
                    std::vector<Tensor> out{g.dx, g.dw};
                    if (with_bias) out.push_back(g.dbias);
                    return out;
                  }});
    cs.back().exact = true;
  }
  cs.push_back({"depthwise_conv2d transposed x [2, 4, 3, 5]", "depthwise_conv2d",
                {in({2, 4, 3, 5}, Layout::Transposed), in({5, 3, 3}), in({5})},
                [](const std::vector<Tensor>& x, Device) {
                  return std::vector<Tensor>{k::depthwise_conv2d(x[0], x[1], x[2])};
                }});
  cs.back().exact = true;
  cs.push_back({"rotary transposed x [2, 4, 6, 3]^T", "rotary", {in({2, 4, 3, 6}, Layout::Transposed), cst({2, 3, 2})},
                [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::rotary(x[0], x[1], false, false)}; }});
  cs.push_back({"toeplitz_add transposed scores", "toeplitz_add", {in({2, 3, 7, 5}, Layout::Transposed), in({3, 11})},
                [](const std::vector<Tensor>& x, Device) { return std::vector<Tensor>{k::toeplitz_add(x[0], x[1])}; }});
  cs.back().exact = true;

  for (double p : {0.0, 0.1, 0.5}) {
    cs.push_back({"dropout_mask [3, 257] p " + std::to_string(p), "dropout_mask", {},
                  [p](const std::vector<Tensor>&, Device dev) {
                    Generator g(42);
                    g.advance(5);  // a non-zero offset
                    Tensor m1 = k::dropout_mask({3, 257}, p, g, DType::F32, dev);
                    Tensor m2 = k::dropout_mask({17}, p, g, DType::F64, dev);  // continues at offset 5 + 771
                    return std::vector<Tensor>{m1, m2};
                  }});
    cs.back().exact = true;
    cs.back().dtypes = {DType::F32};
  }

  const int64_t ignore = 2;  // a real class: rows whose target is 2 are ignored
  for (auto red : {k::Reduction::Mean, k::Reduction::Sum, k::Reduction::None}) {
    const std::string r = red == k::Reduction::Mean ? "mean" : red == k::Reduction::Sum ? "sum" : "none";
    cs.push_back({"cross_entropy " + r + " [9, 7]",
                  "cross_entropy",
                  {in({9, 7}, Layout::Contiguous), idx({9}, 7)},
                  [red](const std::vector<Tensor>& x, Device) {
                    k::CrossEntropyOut o = k::cross_entropy(x[0], x[1], ignore, red);
                    return std::vector<Tensor>{o.loss, o.lse, Tensor::scalar(double(o.counted()), DType::F64)};
                  }});
    cs.back().grad = [red](const std::vector<Variable>& v) { return cross_entropy(v[0], v[1].data(), ignore, red); };
    cs.push_back({"cross_entropy_backward " + r + " [9, 7] transposed logits",
                  "cross_entropy_backward",
                  {in({9, 7}, Layout::Transposed), idx({9}, 7), in(red == k::Reduction::None ? Shape{9} : Shape{})},
                  [red](const std::vector<Tensor>& x, Device) {
                    k::CrossEntropyOut o = k::cross_entropy(x[0], x[1], ignore, red);
                    return std::vector<Tensor>{k::cross_entropy_backward(x[2], x[0], o.lse, x[1], ignore, red, o.count)};
                  }});
  }
  cs.push_back({"cross_entropy all rows ignored [3, 4]", "cross_entropy", {in({3, 4}), idx({3}, 1)},
                [](const std::vector<Tensor>& x, Device) {
                  k::CrossEntropyOut o = k::cross_entropy(x[0], x[1], 0, k::Reduction::Mean);
                  return std::vector<Tensor>{o.loss, o.lse};
                }});
  cs.push_back({"cross_entropy [0, 5]", "cross_entropy", {in({0, 5}), idx({0}, 5)},
                [](const std::vector<Tensor>& x, Device) {
                  k::CrossEntropyOut o = k::cross_entropy(x[0], x[1], -100, k::Reduction::Sum);
                  return std::vector<Tensor>{o.loss, o.lse};
                }});

  for (bool decoupled : {true, false}) {
    cs.push_back({std::string("adam_update ") + (decoupled ? "AdamW" : "Adam + L2") + " [3, 257]", "adam_update",
                  {in({3, 257}), in({3, 257}, Layout::Strided), in({3, 257}), pos({3, 257})},
                  [decoupled](const std::vector<Tensor>& x, Device) {
                    k::AdamStep s{1e-3, 0.9, 0.999, 1e-8, 0.01, decoupled, 1.0 - std::pow(0.9, 3), 1.0 - std::pow(0.999, 3)};
                    Tensor p = x[0], m = x[2], v = x[3];
                    k::adam_update(p, x[1], m, v, s);
                    k::adam_update(p, x[1], m, v, s);
                    return std::vector<Tensor>{p, m, v};
                  }});
    cs.back().exact = true;
  }
}

// The fused attention pair (the CPU backend only: k::supports() says no elsewhere and the
// harness skips it there). Outputs: O and the row logsumexp; the backward's dq, dk, dv, dbias.
inline void add_attention(std::vector<OpCase>& cs) {
  const int64_t B = 2, H = 3, Lq = 5, Lk = 7, dh = 4;
  for (bool causal : {false, true}) {
    const std::string nm = std::string(causal ? " causal" : "") + " [2, 3, 5, 4] x [2, 3, 7, 4]";
    k::AttentionArgs a;
    a.scale = 0.5;
    a.causal = causal;
    cs.push_back({"attention" + nm,
                  "attention",
                  {in({B, H, Lq, dh}, Layout::Strided), in({B, H, Lk, dh}), in({B, H, Lk, dh}), in({H, Lq + Lk - 1})},
                  [a](const std::vector<Tensor>& x, Device) {
                    k::AttentionOut o = k::attention(x[0], x[1], x[2], x[3], Tensor(), a);
                    return std::vector<Tensor>{o.o, o.lse};
                  }});
    cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
    cs.back().grad = [a](const std::vector<Variable>& v) {
      return fused_attention(v[0], v[1], v[2], v[3], Tensor(), a);
    };
    cs.push_back({"attention_backward" + nm,
                  "attention_backward",
                  {in({B, H, Lq, dh}), in({B, H, Lk, dh}), in({B, H, Lk, dh}, Layout::Strided), in({H, Lq + Lk - 1}),
                   in({B, H, Lq, dh})},
                  [a](const std::vector<Tensor>& x, Device) {
                    k::AttentionOut o = k::attention(x[0], x[1], x[2], x[3], Tensor(), a);
                    k::AttentionGrads g = k::attention_backward(x[4], x[0], x[1], x[2], x[3], Tensor(), o, a);
                    return std::vector<Tensor>{g.dq, g.dk, g.dv, g.dbias};
                  }});
    cs.back().rtol32 = 1e-4, cs.back().atol32 = 1e-5;
  }
}

}  // namespace detail

// Every case of the harness: small, odd and degenerate shapes.
inline std::vector<OpCase> backend_cases() {
  std::vector<OpCase> cs;
  detail::add_elementwise(cs);
  detail::add_reductions(cs);
  detail::add_matmul(cs);
  detail::add_softmax(cs);
  detail::add_norms(cs);
  detail::add_indexing(cs);
  detail::add_misc(cs);
  detail::add_attention(cs);
  return cs;
}

// Representative cases at training sizes for the perf mode (bench/bench_backend_ops.cpp).
inline std::vector<OpCase> perf_cases() {
  std::vector<OpCase> cs;
  auto one = [](std::function<Tensor(const std::vector<Tensor>&, Device)> f) {
    return RunFn([f](const std::vector<Tensor>& x, Device d) { return std::vector<Tensor>{f(x, d)}; });
  };
  const int64_t N = 8 * 256, D = 512, V = 8192, H = 8, L = 256;
  cs.push_back({"unary GeluTanh [2048, 2048]", "unary", {in({N, 4 * D})}, one([](auto& x, Device) { return k::unary(k::Unary::GeluTanh, x[0]); })});
  cs.push_back({"binary Add [2048, 512] + [512]", "binary", {in({N, D}), in({D})}, one([](auto& x, Device) { return k::add(x[0], x[1]); })});
  cs.push_back({"binary Mul transposed [512, 2048]", "binary", {in({D, N}, Layout::Transposed), in({D, N})}, one([](auto& x, Device) { return k::mul(x[0], x[1]); })});
  cs.push_back({"reduce Sum [2048, 512] dim 0", "reduce", {in({N, D})}, one([](auto& x, Device) { return k::sum(x[0], {0}); })});
  cs.push_back({"sum_squares [2048, 512]", "sum_squares", {in({N, D})}, one([](auto& x, Device) { return k::sum_squares(x[0]); })});
  for (auto [M, K, Nn] : std::vector<std::array<int64_t, 3>>{{N, D, D}, {N, D, 4 * D}, {N, 4 * D, D}}) {
    cs.push_back({"matmul [" + std::to_string(M) + ", " + std::to_string(K) + "] @ [" + std::to_string(K) + ", " + std::to_string(Nn) + "]",
                  "matmul", {in({M, K}), in({K, Nn})}, one([](auto& x, Device) { return k::matmul(x[0], x[1]); })});
    cs.back().flops = 2.0 * double(M) * double(K) * double(Nn);
  }
  cs.push_back({"matmul batched [64, 256, 64] @ [64, 64, 256]^T", "matmul", {in({8 * H, L, 64}), in({8 * H, 64, L}, Layout::Transposed)},
                one([](auto& x, Device) { return k::matmul(x[0], x[1]); })});
  cs.back().flops = 2.0 * 64 * L * 64 * L;
  cs.push_back({"softmax [8, 8, 256, 256] dim -1", "softmax", {in({8, H, L, L})}, one([](auto& x, Device) { return k::softmax(x[0], -1); })});
  cs.push_back({"layer_norm [2048, 512]", "layer_norm", {in({N, D}), in({D}), in({D})},
                one([](auto& x, Device) { return k::layer_norm(x[0], x[1], x[2], 1e-5).y; })});
  cs.push_back({"layer_norm_backward [2048, 512]", "layer_norm_backward", {in({N, D}), in({N, D}), in({D})},
                one([](auto& x, Device) {
                  k::NormOut o = k::layer_norm(x[0], x[2], Tensor(), 1e-5);
                  return k::layer_norm_backward(x[1], x[0], o.mean, o.rstd, x[2], true).dx;
                })});
  cs.push_back({"embedding [8192, 512] idx [2048]", "embedding", {in({V, D}), idx({N}, V)}, one([](auto& x, Device) { return k::embedding(x[0], x[1]); })});
  cs.push_back({"embedding_backward [2048, 512] -> [8192, 512]", "embedding_backward", {in({N, D}), idx({N}, V)},
                one([V](auto& x, Device) { return k::embedding_backward(x[0], x[1], V); })});
  cs.push_back({"toeplitz_add [8, 8, 256, 256]", "toeplitz_add", {in({8, H, L, L}), in({H, 2 * L - 1})}, one([](auto& x, Device) { return k::toeplitz_add(x[0], x[1]); })});
  cs.push_back({"toeplitz_diag_sum [8, 8, 256, 256]", "toeplitz_diag_sum", {in({8, H, L, L})}, one([](auto& x, Device) { return k::toeplitz_diag_sum(x[0]); })});
  cs.push_back({"cross_entropy [2048, 8192]", "cross_entropy", {in({N, V}), idx({N}, V)},
                one([](auto& x, Device) { return k::cross_entropy(x[0], x[1], -100, k::Reduction::Mean).loss; })});
  cs.push_back({"dropout_mask [2048, 2048]", "dropout_mask", {}, one([](auto&, Device d) {
                  Generator g(1);
                  return k::dropout_mask({N, 4 * D}, 0.1, g, DType::F32, d);
                })});
  cs.push_back({"adam_update [2048, 512]", "adam_update", {in({N, D}), in({N, D}), in({N, D}), pos({N, D})},
                one([](auto& x, Device) {
                  k::AdamStep s{1e-3, 0.9, 0.999, 1e-8, 0.01, true, 0.1, 0.001};
                  k::adam_update(x[0], x[1], x[2], x[3], s);
                  return x[0];
                })});
  for (auto& c : cs) c.dtypes = {DType::F32};
  return cs;
}

}  // namespace relpos::cases
