// autograd/ops/matmul.cpp — C = A @ B with A: [..., M, K], B: [..., K, N].
// Backward: dA = dC @ B^T, dB = A^T @ dC (transposed views go to BLAS as flags), then
// summed over broadcast batch dims. Under autocast (autograd/autocast.h) the inputs, the output
// and the gradients through them take 16-bit values; the products accumulate in float32. All
// of it is one node with no rounding pass of its own: the GEMMs round their operands while
// packing them (k::GemmInputs) and their outputs block by block while in cache
// (k::matmul's round_output) — C, and dA / dB where no batch sum follows (else the sum is
// rounded, as autocast_round's backward would round it). The saved tensors are the unrounded
// inputs, which every GEMM of the backward rounds again; dC needs no rounding before its
// GEMMs for the same reason (rounding is idempotent), so the values are those of
// autocast_round(matmul(a, b)) with autocast_round's gradient rounding, without its passes.
#include <optional>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/ops.h"

namespace relpos {

namespace {
Variable matmul_with(const Variable& a, const Variable& b, k::GemmInputs in) {
  SavedTensor sa(a.data(), "matmul"), sb(b.data(), "matmul");
  bool ga = wants_grad(a), gb = wants_grad(b);
  const bool r16 = in != k::GemmInputs::F32;  // round C, dA, dB to the 16-bit format
  return make_result(
      k::matmul(a.data(), b.data(), in, r16), "matmul", {a, b},
      [sa, sb, ga, gb, in, r16](const Tensor& g) -> std::vector<Tensor> {
        const Tensor &ta = sa.get(), &tb = sb.get();
        // A gradient summed over broadcast batch dims is rounded after the sum.
        const auto summed_to = [in, r16](const Tensor& full, const Shape& shape) {
          if (full.shape() == shape) return full;
          const Tensor s = k::sum_to(full, shape);
          return r16 ? k::unary(in == k::GemmInputs::BF16 ? k::Unary::RoundBF16 : k::Unary::RoundFP16, s) : s;
        };
        Tensor da, db;
        if (ga) {
          Shape full = g.shape();  // batch + [M, K]
          full.back() = ta.size(-1);
          da = summed_to(k::matmul(g, tb.transpose(-1, -2), in, r16 && full == ta.shape()), ta.shape());
        }
        if (gb) {
          // Unbatched B with batched A: fold A's batch into rows (one GEMM).
          if (tb.dim() == 2 && ta.dim() > 2) {
            db = k::matmul(ta.reshape({-1, ta.size(-1)}).transpose(0, 1), g.reshape({-1, g.size(-1)}), in, r16);
          } else {
            Shape full = g.shape();  // batch + [K, N]
            full[full.size() - 2] = ta.size(-1);
            db = summed_to(k::matmul(ta.transpose(-1, -2), g, in, r16 && full == tb.shape()), tb.shape());
          }
        }
        return {da, db};
      });
}
}  // namespace

Variable matmul(const Variable& a, const Variable& b) {
  const Precision p = autocast_precision();
  return matmul_with(a, b, a.dtype() == DType::F32 ? gemm_inputs(p) : k::GemmInputs::F32);
}

// y = x W^T + b. Backward (g: [..., N], folded to rows [M, N] with x [M, K]):
//   dx = g W          [..., N] @ [N, K]
//   dW = g^T x        [N, M] @ [M, K]  (g's transpose is a view handed to the GEMM as a flag)
//   db = sum_rows(g)  [N]
// Under autocast the rounding is matmul's (above): x and W are rounded by the GEMMs, y, dx and
// dW by their GEMMs' epilogues; the bias is added after y's rounding and its gradient is the
// float32 sum of g, as for a separate add. With an activation (linear(x, W, b, act)):
//   y = act(pre), pre = x W^T + b; the forward's epilogue also saves act'(pre) [..., N];
//   g_pre = g act'(pre), then the three products above with g_pre — the values of
//   act(linear(x, W, b)) as two nodes (unary_grad's g act'(pre) is the same product).
namespace {
// dW = g^T x [N, K] and db = sum_rows(g) [N], each when wanted (g: [..., N], x: [..., K], folded to
// rows): both from one GEMM that sums g's rows while it reads them (k::matmul_sums) when both are.
void weight_and_bias_grads(const Tensor& g, const Tensor& x, bool gw, bool gb, k::GemmInputs in, bool r16, Tensor& dw,
                           Tensor& db) {
  const int64_t N = g.size(-1);
  if (!gw) {
    if (gb) db = k::sum_to(g, {N});
    return;
  }
  const Tensor gt = g.reshape({-1, N}).transpose(0, 1), xr = x.reshape({-1, x.size(-1)});
  if (!gb) {
    dw = k::matmul(gt, xr, in, r16);
    return;
  }
  k::MatmulSumsOut o = k::matmul_sums(gt, xr, in, r16);
  dw = std::move(o.y), db = std::move(o.a_sums);
}

// The output shape of x W^T ([..., K] x [N, K]): x's shape with its last dim N.
Shape linear_shape(const Variable& x, int64_t N) {
  Shape s = x.shape();
  s.back() = N;
  return s;
}

// A residual r added to a linear layer's output (its GEMM's epilogue, k::matmul_add) must have the
// output's shape.
void check_residual(const Variable& r, const Shape& out, const char* op) {
  RELPOS_CHECK(!r.defined() || r.shape() == out, "{}: the residual must be {} (the output's shape), got {}", op,
               shape_str(out), shape_str(r.shape()));
}

// linear, with act (k::is_activation) applied in the GEMM's epilogue when given, or a residual r
// added in it (r + x W^T + b; the two are not combined). Backward with act: g_pre = g act'(pre)
// (act' saved by the forward's epilogue), then linear's backward; with r: dr = g.
Variable linear_impl(const Variable& x, const Variable& w, const Variable& b, std::optional<k::Unary> act,
                     const Variable& r) {
  RELPOS_CHECK(w.dim() == 2, "linear: weight must be [out, in], got {}", shape_str(w.shape()));
  RELPOS_CHECK(x.dim() >= 1 && x.size(-1) == w.size(1), "linear: input {} has last dim {}, expected {} (weight {})",
               shape_str(x.shape()), x.dim() >= 1 ? x.size(-1) : 0, w.size(1), shape_str(w.shape()));
  check_residual(r, linear_shape(x, w.size(0)), "linear");
  const k::GemmInputs in = x.dtype() == DType::F32 ? gemm_inputs(autocast_precision()) : k::GemmInputs::F32;
  const bool r16 = in != k::GemmInputs::F32;
  SavedTensor sx(x.data(), "linear"), sw(w.data(), "linear");
  const bool gx = wants_grad(x), gw = wants_grad(w), gb = wants_grad(b), gr = wants_grad(r);
  const Tensor bias = b.defined() ? b.data() : Tensor();
  const Tensor wt = w.data().transpose(0, 1);
  const bool has_act = act.has_value();
  k::MatmulActOut out;
  if (has_act)
    out = k::matmul_act(x.data(), wt, in, r16, bias, *act, GradMode::is_enabled() && (gx || gw || gb));
  else if (r.defined())
    out.y = k::matmul_add(x.data(), wt, in, r16, bias, r.data());
  else
    out.y = k::matmul(x.data(), wt, in, r16, bias);
  SavedTensor sd(out.act_grad, "linear");
  return make_result(out.y,
                     has_act       ? "linear_act"
                     : r.defined() ? "linear_add"
                                   : "linear",
                     {x, w, b, r},
                     [sx, sw, sd, has_act, gx, gw, gb, gr, in, r16](const Tensor& g_out) -> std::vector<Tensor> {
                       const Tensor &tx = sx.get(), &tw = sw.get();
                       // act' is saved whenever this node exists (the same condition as make_result's)
                       const Tensor g = has_act ? k::mul(g_out, sd.get()) : g_out;
                       Tensor dx, dw, db;
                       if (gx) dx = k::matmul(g, tw, in, r16);
                       weight_and_bias_grads(g, tx, gw, gb, in, r16, dw, db);
                       return {dx, dw, db, gr ? g_out : Tensor()};
                     });
}
}  // namespace

Variable linear(const Variable& x, const Variable& w, const Variable& b) {
  return linear_impl(x, w, b, std::nullopt, Variable());
}

Variable linear(const Variable& x, const Variable& w, const Variable& b, const Variable& residual) {
  return linear_impl(x, w, b, std::nullopt, residual);
}

// y = act(x W1^T + b1) W2^T + b2, h = act(pre). Backward (g: [..., D'], rows [M, D'], h [M, F]):
//   db2 = sum_rows(g);  dW2 = g^T h                  [D', M] @ [M, F]
//   g_pre = (g W2) act'(pre)                         [M, D'] @ [D', F], act' (saved by the forward's
//                                                    epilogue) in this GEMM's epilogue
//   db1 = sum_rows(g_pre);  dW1 = g_pre^T x;  dx = g_pre W1
// Under autocast, g W2 is rounded before the multiply, as linear's dx was (the same values as
// the two nodes: the multiply moved into the epilogue, nothing else).
Variable mlp(const Variable& x, const Variable& w1, const Variable& b1, const Variable& w2, const Variable& b2,
             k::Unary act, const Variable& residual) {
  RELPOS_CHECK(k::is_activation(act), "mlp: op {} is not an activation (expected relu, gelu, gelu_tanh or silu)",
               int(act));
  RELPOS_CHECK(w1.dim() == 2 && w2.dim() == 2 && w2.size(1) == w1.size(0),
               "mlp: weights {} and {} do not chain (expected [F, D] and [D', F])", shape_str(w1.shape()),
               shape_str(w2.shape()));
  RELPOS_CHECK(x.dim() >= 1 && x.size(-1) == w1.size(1), "mlp: input {} has last dim {}, expected {} (weight {})",
               shape_str(x.shape()), x.dim() >= 1 ? x.size(-1) : 0, w1.size(1), shape_str(w1.shape()));
  check_residual(residual, linear_shape(x, w2.size(0)), "mlp");
  const k::GemmInputs in = x.dtype() == DType::F32 ? gemm_inputs(autocast_precision()) : k::GemmInputs::F32;
  const bool r16 = in != k::GemmInputs::F32;
  const bool gx = wants_grad(x), gw1 = wants_grad(w1), gb1 = wants_grad(b1), gw2 = wants_grad(w2), gb2 = wants_grad(b2),
             gr = wants_grad(residual);
  const bool g_pre = gx || gw1 || gb1;  // the backward goes through the activation
  const k::MatmulActOut h = k::matmul_act(x.data(), w1.data().transpose(0, 1), in, r16,
                                          b1.defined() ? b1.data() : Tensor(), act, GradMode::is_enabled() && g_pre);
  const Tensor w2t = w2.data().transpose(0, 1), bias2 = b2.defined() ? b2.data() : Tensor();
  Tensor y = residual.defined() ? k::matmul_add(h.y, w2t, in, r16, bias2, residual.data())
                                : k::matmul(h.y, w2t, in, r16, bias2);
  SavedTensor sx(x.data(), "mlp"), sw1(w1.data(), "mlp"), sw2(w2.data(), "mlp"), sh(h.y, "mlp"), sd(h.act_grad, "mlp");
  return make_result(std::move(y), "mlp", {x, w1, b1, w2, b2, residual},
                     [sx, sw1, sw2, sh, sd, gx, gw1, gb1, gw2, gb2, gr, g_pre, in, r16](const Tensor& g) {
                       const Tensor &tx = sx.get(), &tw1 = sw1.get(), &tw2 = sw2.get(), &th = sh.get();
                       Tensor dx, dw1, db1, dw2, db2;
                       weight_and_bias_grads(g, th, gw2, gb2, in, r16, dw2, db2);
                       if (g_pre) {
                         const Tensor gp = k::matmul_mul(g, tw2, in, r16, sd.get());
                         if (gx) dx = k::matmul(gp, tw1, in, r16);
                         weight_and_bias_grads(gp, tx, gw1, gb1, in, r16, dw1, db1);
                       }
                       return std::vector<Tensor>{dx, dw1, db1, dw2, db2, gr ? g : Tensor()};
                     });
}

Variable linear(const Variable& x, const Variable& w, const Variable& b, k::Unary act) {
  RELPOS_CHECK(k::is_activation(act), "linear: op {} is not an activation (expected relu, gelu, gelu_tanh or silu)",
               int(act));
  return linear_impl(x, w, b, act, Variable());
}

}  // namespace relpos
