// kernels/checks.cpp — the argument checks of the raw ops (declared in kernels/checks.h,
// one per line of kernels/op_table.inc), run once by the dispatch layer before any backend,
// in the order the backends ran them and with their messages. Where the CPU and the CUDA
// backend checked differently, the stricter check is kept (noted at the op).
// What stays in a backend: checks that read tensor values (index, target, bucket and
// index-bias ranges, integer division by zero), what both backends checked after those (so a
// call with two faults reports the same one as before), and its own limits (CUDA: rank <= 8).
#include "kernels/checks.h"

#include <algorithm>
#include <vector>

namespace relpos::k::check {

namespace {

void floating(DType t, const char* op) {
  RELPOS_CHECK(is_floating(t), "{}: expected a floating dtype (float32 or float64), got {}", op, dtype_name(t));
}

// The softmax family: x (and gy) of one shape, dim a dim of it, a floating dtype. The CPU did
// not check that x is defined (the CUDA backend did; kept).
RowsPlan rowwise(const Tensor& x, const Tensor* gy, int64_t dim, const char* op) {
  if (gy) check_same_dtype_device(x, *gy, op);
  check_defined(x, op, "input");
  const RowsPlan plan = plan_rows(x, dim, op);
  if (gy)
    RELPOS_CHECK(gy->shape() == x.shape(), "{}: shapes differ: {} vs {}", op, shape_str(x.shape()),
                 shape_str(gy->shape()));
  floating(x.dtype(), op);
  return plan;
}

}  // namespace

// ------------------------------------------------------------------ checked here

void causal_fill(const Tensor& x, int64_t, int64_t, double) {
  check_defined(x, "causal_fill", "input");
  RELPOS_CHECK(x.dim() >= 2, "causal_fill: expected [..., Lq, Lk], got {}", describe(x));
  floating(x.dtype(), "causal_fill");
}

void sum_squares(const Tensor& x) {
  check_defined(x, "sum_squares", "input");
  floating(x.dtype(), "sum_squares");
}

// Empty products (K == 0 or an empty output) are zeros of any dtype, on both backends.
MatmulPlan matmul(const Tensor& a, const Tensor& b, GemmInputs, bool, const Tensor& bias) {
  check_same_dtype_device(a, b, "matmul");
  const MatmulPlan plan = plan_matmul(a, b);
  if (bias.defined()) {
    check_same_dtype_device(a, bias, "matmul (bias)");
    RELPOS_CHECK(bias.dim() == 1 && bias.size(0) == plan.N,
                 "matmul: bias must be [{}] (the output's last dim), got {}", plan.N, shape_str(bias.shape()));
  }
  if (!plan.empty()) floating(a.dtype(), "matmul");
  return plan;
}

// matmul's checks, then an activation from is_activation's table on floating data.
MatmulPlan matmul_act(const Tensor& a, const Tensor& b, GemmInputs inputs, bool round_output, const Tensor& bias,
                      Unary act, bool) {
  const MatmulPlan plan = check::matmul(a, b, inputs, round_output, bias);
  RELPOS_CHECK(is_activation(act), "matmul_act: op {} is not an activation (expected relu, gelu, gelu_tanh or silu)",
               int(act));
  floating(a.dtype(), "matmul_act");
  return plan;
}

namespace {
// An elementwise operand t of a product's epilogue (`what`: the multiplier, the addend) for op:
// defined, a's dtype and device, the product's shape (floating a: matmul's checks ran first).
void check_product_shaped(const Tensor& a, const MatmulPlan& plan, const Tensor& t, const char* op, const char* what) {
  floating(a.dtype(), op);
  RELPOS_CHECK(t.defined(), "{}: the {} is undefined", op, what);
  check_same_dtype_device(a, t, fmt::format("{} ({})", op, what).c_str());
  RELPOS_CHECK(t.shape() == plan.out_shape, "{}: the {} must be {} (the product's shape), got {}", op, what,
               shape_str(plan.out_shape), shape_str(t.shape()));
}
}  // namespace

MatmulPlan matmul_mul(const Tensor& a, const Tensor& b, GemmInputs inputs, bool round_output, const Tensor& m) {
  const MatmulPlan plan = check::matmul(a, b, inputs, round_output, Tensor());
  check_product_shaped(a, plan, m, "matmul_mul", "multiplier");
  return plan;
}

MatmulPlan matmul_add(const Tensor& a, const Tensor& b, GemmInputs inputs, bool round_output, const Tensor& bias,
                      const Tensor& r) {
  const MatmulPlan plan = check::matmul(a, b, inputs, round_output, bias);
  check_product_shaped(a, plan, r, "matmul_add", "addend");
  return plan;
}

MatmulPlan matmul_sums(const Tensor& a, const Tensor& b, GemmInputs inputs, bool round_output) {
  check_defined(a, "matmul_sums", "a");
  check_defined(b, "matmul_sums", "b");
  RELPOS_CHECK(a.dim() == 2 && b.dim() == 2, "matmul_sums: a and b must be matrices, got {} and {}",
               shape_str(a.shape()), shape_str(b.shape()));
  const MatmulPlan plan = check::matmul(a, b, inputs, round_output, Tensor());
  floating(a.dtype(), "matmul_sums");
  return plan;
}

RowsPlan softmax(const Tensor& x, int64_t dim) {
  return rowwise(x, nullptr, dim, "softmax");
}
RowsPlan log_softmax(const Tensor& x, int64_t dim) {
  return rowwise(x, nullptr, dim, "log_softmax");
}
RowsPlan softmax_backward(const Tensor& y, const Tensor& gy, int64_t dim) {
  return rowwise(y, &gy, dim, "softmax_backward");
}
RowsPlan log_softmax_backward(const Tensor& y, const Tensor& gy, int64_t dim) {
  return rowwise(y, &gy, dim, "log_softmax_backward");
}

void toeplitz_add(const Tensor& s, const Tensor& t) {
  check_same_dtype_device(s, t, "toeplitz_add");
  RELPOS_CHECK(s.dim() == 4, "toeplitz_add: scores must be [B, H, Lq, Lk], got {}", shape_str(s.shape()));
  const int64_t H = s.size(1), Lq = s.size(2), Lk = s.size(3);
  RELPOS_CHECK(t.dim() == 2 && t.size(0) == H && t.size(1) == Lq + Lk - 1,
               "toeplitz_add: bias must be [H, Lq + Lk - 1] = [{}, {}] for scores {}, got {}", H, Lq + Lk - 1,
               shape_str(s.shape()), shape_str(t.shape()));
  floating(s.dtype(), "toeplitz_add");
}

void toeplitz_diag_sum(const Tensor& ds) {
  check_defined(ds, "toeplitz_diag_sum", "gradient");
  RELPOS_CHECK(ds.dim() == 4, "toeplitz_diag_sum: expected [B, H, Lq, Lk], got {}", shape_str(ds.shape()));
  floating(ds.dtype(), "toeplitz_diag_sum");
}

namespace {
// x [B, H, W, C], w [C, k, k] with k odd, same dtype and device, floating.
void conv_args(const Tensor& x, const Tensor& w, const char* op) {
  check_defined(x, op, "input");
  check_defined(w, op, "weight");
  check_same_dtype_device(x, w, op);
  RELPOS_CHECK(x.dim() == 4, "{}: x must be [B, H, W, C], got {}", op, shape_str(x.shape()));
  RELPOS_CHECK(w.dim() == 3 && w.size(0) == x.size(3) && w.size(1) == w.size(2) && w.size(1) % 2 == 1,
               "{}: w must be [C, k, k] with C = {} and k odd, got {}", op, x.size(3), shape_str(w.shape()));
  floating(x.dtype(), op);
}
}  // namespace

void depthwise_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias) {
  conv_args(x, w, "depthwise_conv2d");
  if (bias.defined()) {
    check_same_dtype_device(x, bias, "depthwise_conv2d");
    RELPOS_CHECK(bias.dim() == 1 && bias.size(0) == x.size(3), "depthwise_conv2d: bias must be [C] = [{}], got {}",
                 x.size(3), shape_str(bias.shape()));
  }
}

void depthwise_conv2d_backward(const Tensor& gy, const Tensor& x, const Tensor& w, bool) {
  check_defined(gy, "depthwise_conv2d_backward", "gradient");
  conv_args(x, w, "depthwise_conv2d_backward");
  check_same_dtype_device(x, gy, "depthwise_conv2d_backward");
  RELPOS_CHECK(gy.shape() == x.shape(), "depthwise_conv2d_backward: gradient {} and input {} differ in shape",
               shape_str(gy.shape()), shape_str(x.shape()));
}

void rotary(const Tensor& x, const Tensor& cs, bool, bool) {
  check_defined(x, "rotary", "x");
  check_same_dtype_device(x, cs, "rotary");
  RELPOS_CHECK(x.dim() >= 2, "rotary: x must be [..., L, dh], got {}", shape_str(x.shape()));
  const int64_t L = x.size(-2), dh = x.size(-1);
  RELPOS_CHECK(cs.dim() == 3 && cs.size(0) == 2 && cs.size(1) == L && 2 * cs.size(2) <= dh,
               "rotary: cos/sin table must be [2, L, r/2] = [2, {}, <= {}] for x {}, got {}", L, dh / 2,
               shape_str(x.shape()), shape_str(cs.shape()));
  floating(x.dtype(), "rotary");
}

void dropout_mask(const Shape&, double p, Generator&, DType dtype) {
  RELPOS_CHECK(p >= 0.0 && p < 1.0, "dropout: p must be in [0, 1), got {}", p);
  floating(dtype, "dropout");
}

// The CPU did not check that param is defined (the CUDA backend did; kept).
void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const AdamStep&) {
  check_defined(param, "adam_update", "parameter");
  for (const Tensor* t : {&grad, &exp_avg, &exp_avg_sq}) {
    check_defined(*t, "adam_update", "state");
    RELPOS_CHECK(t->shape() == param.shape() && t->dtype() == param.dtype(),
                 "adam_update: {} does not match the parameter {}", describe(*t), describe(param));
  }
  RELPOS_CHECK(param.is_contiguous() && exp_avg.is_contiguous() && exp_avg_sq.is_contiguous(),
               "adam_update: parameter and moments must be contiguous ({})", describe(param));
  floating(param.dtype(), "adam_update");
}

// ------------------------------------------------------------------ elementwise

// The CPU did not check that x is defined (the CUDA backend did; kept).
void unary(Unary, const Tensor& x, double, double) {
  check_defined(x, "unary op", "input");
  floating(x.dtype(), "unary op");
}

void unary_grad(Unary, const Tensor& g, const Tensor& x, double, double) {
  check_same_dtype_device(g, x, "unary_grad");
  RELPOS_CHECK(g.shape() == x.shape(), "unary_grad: gradient {} and input {} differ", shape_str(g.shape()),
               shape_str(x.shape()));
  floating(x.dtype(), "unary_grad");
}

// Any dtype (int64 too). Integer division by zero is found by the kernel, so it stays there.
void binary(Binary op, const Tensor& a, const Tensor& b) {
  check_same_dtype_device(a, b, "binary op");
  const char* name = op == Binary::Add   ? "add"
                     : op == Binary::Sub ? "sub"
                     : op == Binary::Mul ? "mul"
                     : op == Binary::Div ? "div"
                                         : "binary op";
  broadcast_shapes(a.shape(), b.shape(), name);
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same_dtype_device(a, b, "where");
  check_defined(cond, "where", "condition");
  broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
}

void add_(const Tensor& dst, const Tensor& src, double) {
  check_same_dtype_device(dst, src, "add_");
  src.expand(dst.shape());  // a view: throws when src does not broadcast to dst
  floating(dst.dtype(), "add_");
}

void mul_(const Tensor& dst, double) {
  check_defined(dst, "mul_", "tensor");
  floating(dst.dtype(), "mul_");
}

// ------------------------------------------------------------------ reductions

ReducePlan reduce(Reduce op, const Tensor& x, std::vector<int64_t> dims, bool keepdim, int64_t) {
  check_defined(x, "reduce", "input");
  ReducePlan plan = plan_reduce(x, dims, keepdim);
  RELPOS_CHECK(plan.R > 0 || op == Reduce::Sum || op == Reduce::Mean,
               "reduce: cannot take max/min/logsumexp/var over an empty dim (shape {})", shape_str(x.shape()));
  floating(x.dtype(), "reduce");
  return plan;
}

// ------------------------------------------------------------------ normalization

namespace {

void norm_args(const char* op, const Tensor& x, const Tensor& w, const Tensor& b) {
  check_defined(x, op, "input");
  RELPOS_CHECK(x.dim() >= 1, "{}: input must have at least 1 dim", op);
  const int64_t D = x.size(-1);
  for (const Tensor* t : {&w, &b}) {
    if (!t->defined()) continue;
    check_same_dtype_device(x, *t, op);
    RELPOS_CHECK(t->dim() == 1 && t->size(0) == D, "{}: weight/bias shape {} does not match last dim {} of input {}",
                 op, shape_str(t->shape()), D, shape_str(x.shape()));
  }
  floating(x.dtype(), op);
}

// The CPU checked only dtypes and devices here; the CUDA backend's shape and saved-statistics
// checks are kept.
void norm_backward_args(const char* op, const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd) {
  check_same_dtype_device(gy, x, op);
  RELPOS_CHECK(x.dim() >= 1, "{}: input must have at least 1 dim", op);
  RELPOS_CHECK(gy.shape() == x.shape(), "{}: gradient {} and input {} differ", op, shape_str(gy.shape()),
               shape_str(x.shape()));
  floating(x.dtype(), op);
  const int64_t D = x.size(-1), rows = D == 0 ? 0 : x.numel() / D;
  for (const Tensor* t : {&rstd, &mean})
    if (t->defined())
      RELPOS_CHECK(t->numel() == rows && t->dtype() == x.dtype(), "{}: saved statistics {} do not match input {}", op,
                   describe(*t), describe(x));
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double) {
  norm_args("layer_norm", x, weight, bias);
}
void rms_norm(const Tensor& x, const Tensor& weight, double) {
  norm_args("rms_norm", x, weight, Tensor());
}
void layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor&,
                         bool) {
  norm_backward_args("layer_norm_backward", gy, x, mean, rstd);
}
void rms_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& rstd, const Tensor&) {
  norm_backward_args("rms_norm_backward", gy, x, Tensor(), rstd);
}

// ------------------------------------------------------------------ indexing
// Index values are range-checked by the backends, which read them anyway (on the host), and
// so is what both backends checked after them (embedding_backward's gradient size,
// index_add's source, the floating dtype of embedding, embedding_backward and index_add).

namespace {

void index_tensor(const Tensor& idx, const char* op) {
  check_defined(idx, op, "index");
  RELPOS_CHECK(idx.dtype() == DType::I64, "{}: indices must be int64, got {}", op, describe(idx));
}

void gather_shapes(const Shape& xs, const Tensor& idx, int64_t dim, const char* op) {
  dim = wrap_existing_dim(dim, int64_t(xs.size()), op);
  RELPOS_CHECK(idx.dim() == int64_t(xs.size()), "{}: index {} must have the same rank as input {}", op,
               shape_str(idx.shape()), shape_str(xs));
  for (int64_t d = 0; d < idx.dim(); ++d)
    RELPOS_CHECK(d == dim || idx.size(d) <= xs[size_t(d)], "{}: index {} larger than input {} at dim {}", op,
                 shape_str(idx.shape()), shape_str(xs), d);
}

}  // namespace

void embedding(const Tensor& weight, const Tensor& idx) {
  index_tensor(idx, "embedding");
  RELPOS_CHECK(weight.dim() == 2, "embedding: weight must be [V, D], got {}", shape_str(weight.shape()));
}

// The CPU did not check that gy is defined (the CUDA backend did; kept).
void embedding_backward(const Tensor& gy, const Tensor& idx, int64_t) {
  index_tensor(idx, "embedding_backward");
  check_defined(gy, "embedding_backward", "gradient");
}

void index_select(const Tensor& x, int64_t dim, const Tensor& idx) {
  index_tensor(idx, "index_select");
  RELPOS_CHECK(idx.dim() == 1, "index_select: index must be 1-d, got {}", shape_str(idx.shape()));
  wrap_existing_dim(dim, x.dim(), "index_select");
}

void index_add(const Shape& shape, int64_t dim, const Tensor& idx, const Tensor&) {
  index_tensor(idx, "index_add");
  wrap_existing_dim(dim, int64_t(shape.size()), "index_add");
}

// The CPU did not check that x is defined (the CUDA backend did; kept).
void gather(const Tensor& x, int64_t dim, const Tensor& idx) {
  index_tensor(idx, "gather");
  check_defined(x, "gather", "input");
  gather_shapes(x.shape(), idx, dim, "gather");
  floating(x.dtype(), "gather");
}

// The CPU did not check that src is defined (the CUDA backend did; kept).
void scatter_add(const Shape& shape, int64_t dim, const Tensor& idx, const Tensor& src) {
  index_tensor(idx, "scatter_add");
  gather_shapes(shape, idx, dim, "scatter_add");
  check_defined(src, "scatter_add", "source");
  RELPOS_CHECK(src.shape() == idx.shape(), "scatter_add: source {} must match index {}", shape_str(src.shape()),
               shape_str(idx.shape()));
  floating(src.dtype(), "scatter_add");
}

// ------------------------------------------------------------------ loss
// Target values are range-checked by the backends (they count the rows not ignored from the
// same host copy), and the floating dtype of the logits after them, as before.

namespace {

void ce_args(const Tensor& logits, const Tensor& target, const char* op) {
  check_defined(logits, op, "logits");
  check_defined(target, op, "target");
  RELPOS_CHECK(logits.dim() == 2, "{}: logits must be [N, C], got {}", op, shape_str(logits.shape()));
  RELPOS_CHECK(target.dtype() == DType::I64, "{}: target must be int64, got {}", op, describe(target));
  RELPOS_CHECK(target.dim() == 1 && target.size(0) == logits.size(0),
               "{}: target {} must be [N] with N = {} (logits {})", op, shape_str(target.shape()), logits.size(0),
               shape_str(logits.shape()));
}

}  // namespace

void cross_entropy(const Tensor& logits, const Tensor& target, int64_t, Reduction) {
  ce_args(logits, target, "cross_entropy");
}

// The CPU checked only logits and target; the CUDA backend's checks of g and lse are kept.
void cross_entropy_backward(const Tensor& g, const Tensor& logits, const Tensor& lse, const Tensor& target, int64_t,
                            Reduction reduction, int64_t) {
  ce_args(logits, target, "cross_entropy_backward");
  check_defined(g, "cross_entropy_backward", "gradient");
  check_defined(lse, "cross_entropy_backward", "lse");
  const int64_t N = logits.size(0);
  RELPOS_CHECK(g.dtype() == logits.dtype() && lse.dtype() == logits.dtype(),
               "cross_entropy_backward: gradient {} and lse {} must have the logits' dtype ({})", describe(g),
               describe(lse), describe(logits));
  RELPOS_CHECK(lse.numel() == N, "cross_entropy_backward: lse {} must be [N] with N = {}", shape_str(lse.shape()), N);
  RELPOS_CHECK(reduction == Reduction::None ? g.numel() == N : g.numel() == 1,
               "cross_entropy_backward: gradient {} must be [] (mean/sum) or [N] (none)", shape_str(g.shape()));
}

// ------------------------------------------------------------------ fused attention
// Only the CPU backend has the kernel (the CUDA backend refuses it after these checks). The
// bucket and index-bias values, and what the backward checked after them (the saved forward
// and the gradients), are checked by the CPU backend.

namespace {

struct Dims {
  int64_t B, H, Lq, Lk, dh;
};

void attention_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, const Tensor& kp,
                    const AttentionBuckets& bk, const AttentionIndexBias& ib, const char* op) {
  check_defined(q, op, "q");
  check_same_dtype_device(q, k, op);
  check_same_dtype_device(q, v, op);
  RELPOS_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "{}: q, k, v must be [B, H, L, dh], got {}, {}, {}", op,
               shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
  const Dims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
  RELPOS_CHECK(k.size(0) == d.B && k.size(1) == d.H && k.size(3) == d.dh && v.shape() == k.shape(),
               "{}: k {} and v {} must be [B, H, Lk, dh] = [{}, {}, Lk, {}] for q {}", op, shape_str(k.shape()),
               shape_str(v.shape()), d.B, d.H, d.dh, shape_str(q.shape()));
  if (bias.defined()) {
    check_same_dtype_device(q, bias, op);
    RELPOS_CHECK(bias.dim() == 2 && bias.size(0) == d.H && bias.size(1) == d.Lq + d.Lk - 1,
                 "{}: bias must be [H, Lq + Lk - 1] = [{}, {}], got {}", op, d.H, d.Lq + d.Lk - 1,
                 shape_str(bias.shape()));
  }
  if (kp.defined())
    RELPOS_CHECK(kp.dim() == 2 && kp.size(0) == d.B && kp.size(1) == d.Lk,
                 "{}: key padding must be [B, Lk] = [{}, {}], got {}", op, d.B, d.Lk, describe(kp));
  RELPOS_CHECK(bk.qr.defined() == bk.bucket.defined(), "{}: bucket terms need both qr and bucket", op);
  if (bk.qr.defined()) {
    check_same_dtype_device(q, bk.qr, op);
    RELPOS_CHECK(
        bk.qr.dim() == 4 && bk.qr.size(0) == d.B && bk.qr.size(1) == d.H && bk.qr.size(2) == d.Lq && bk.qr.size(3) >= 1,
        "{}: qr must be [B, H, Lq, NB] = [{}, {}, {}, NB], got {}", op, d.B, d.H, d.Lq, shape_str(bk.qr.shape()));
    RELPOS_CHECK(bk.bucket.dtype() == DType::I64 && bk.bucket.dim() == 1 && bk.bucket.size(0) == d.Lq + d.Lk - 1,
                 "{}: bucket must be int64 [Lq + Lk - 1] = [{}], got {}", op, d.Lq + d.Lk - 1, describe(bk.bucket));
  }
  RELPOS_CHECK(ib.table.defined() == ib.index.defined(), "{}: an index bias needs both table and index", op);
  if (ib.table.defined()) {
    check_same_dtype_device(q, ib.table, op);
    RELPOS_CHECK(ib.table.dim() == 2 && ib.table.size(0) >= 1 && ib.table.size(1) == d.H,
                 "{}: index-bias table must be [NT, H] = [NT, {}], got {}", op, d.H, shape_str(ib.table.shape()));
    const Tensor& ix = ib.index;
    RELPOS_CHECK(
        ix.dtype() == DType::I64 && ((ix.dim() == 2 && ix.size(0) == d.Lq && ix.size(1) == d.Lk) ||
                                     (ix.dim() == 3 && ix.size(0) == d.B && ix.size(1) == d.Lq && ix.size(2) == d.Lk)),
        "{}: index-bias index must be int64 [Lq, Lk] = [{}, {}] or [B, Lq, Lk] = [{}, {}, {}], got {}", op, d.Lq, d.Lk,
        d.B, d.Lq, d.Lk, describe(ix));
  }
}

}  // namespace

void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, const Tensor& key_padding,
               const AttentionArgs& a, const AttentionBuckets& buckets, const AttentionIndexBias& index_bias) {
  attention_args(q, k, v, bias, key_padding, buckets, index_bias, "attention");
  RELPOS_CHECK(a.dropout_p >= 0.0 && a.dropout_p < 1.0, "attention: dropout p must be in [0, 1), got {}", a.dropout_p);
}

void attention_backward(const Tensor&, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                        const Tensor& key_padding, const AttentionOut&, const AttentionArgs&,
                        const AttentionBuckets& buckets, const Tensor&, const AttentionIndexBias& index_bias) {
  attention_args(q, k, v, bias, key_padding, buckets, index_bias, "attention_backward");
}

}  // namespace relpos::k::check
