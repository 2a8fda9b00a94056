// kernels/checks.cpp — the argument checks of the raw ops (declared in kernels/checks.h,
// one per line of kernels/op_table.inc), run once by the dispatch layer before any backend,
// in the order the backends ran them and with their messages. Where the CPU and the CUDA
// backend checked differently, the stricter check is kept (noted at the op).
// Ops listed under "still checked in the backends" have an empty check here: their checks
// are interleaved with the kernels' own geometry (index and norm ops, cross entropy,
// elementwise broadcasting, reduce, attention) and have not moved yet.
#include "kernels/checks.h"

namespace relpos::k::check {

namespace {

void floating(DType t, const char* op) {
  RELPOS_CHECK(is_floating(t), "{}: expected a floating dtype (float32 or float64), got {}", op, dtype_name(t));
}

// The softmax family: x (and gy) of one shape, dim a dim of it, a floating dtype. The CPU did
// not check that x is defined (the CUDA backend did; kept).
void rowwise(const Tensor& x, const Tensor* gy, int64_t dim, const char* op) {
  if (gy) check_same_dtype_device(x, *gy, op);
  check_defined(x, op, "input");
  wrap_dim(dim, x.dim(), op);
  if (gy)
    RELPOS_CHECK(gy->shape() == x.shape(), "{}: shapes differ: {} vs {}", op, shape_str(x.shape()),
                 shape_str(gy->shape()));
  floating(x.dtype(), op);
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
void matmul(const Tensor& a, const Tensor& b) {
  check_same_dtype_device(a, b, "matmul");
  RELPOS_CHECK(a.dim() >= 2 && b.dim() >= 2, "matmul: both operands need at least 2 dims, got {} and {}",
               shape_str(a.shape()), shape_str(b.shape()));
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  RELPOS_CHECK(b.size(-2) == K, "matmul: inner dims differ: {} @ {} ({} vs {})", shape_str(a.shape()),
               shape_str(b.shape()), K, b.size(-2));
  const Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                       Shape(b.shape().begin(), b.shape().end() - 2), "matmul (batch dims)");
  if (K == 0 || numel_of(batch) * M * N == 0) return;
  floating(a.dtype(), "matmul");
}

void softmax(const Tensor& x, int64_t dim) {
  rowwise(x, nullptr, dim, "softmax");
}
void log_softmax(const Tensor& x, int64_t dim) {
  rowwise(x, nullptr, dim, "log_softmax");
}
void softmax_backward(const Tensor& y, const Tensor& gy, int64_t dim) {
  rowwise(y, &gy, dim, "softmax_backward");
}
void log_softmax_backward(const Tensor& y, const Tensor& gy, int64_t dim) {
  rowwise(y, &gy, dim, "log_softmax_backward");
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

// ------------------------------------------------------------------ still checked in the backends

void unary(Unary, const Tensor&, double, double) {}
void unary_grad(Unary, const Tensor&, const Tensor&, double, double) {}
void binary(Binary, const Tensor&, const Tensor&) {}
void where(const Tensor&, const Tensor&, const Tensor&) {}
void add_(const Tensor&, const Tensor&, double) {}
void mul_(const Tensor&, double) {}
void reduce(Reduce, const Tensor&, std::vector<int64_t>, bool, int64_t) {}
void layer_norm(const Tensor&, const Tensor&, const Tensor&, double) {}
void rms_norm(const Tensor&, const Tensor&, double) {}
void layer_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool) {}
void rms_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&) {}
void embedding(const Tensor&, const Tensor&) {}
void embedding_backward(const Tensor&, const Tensor&, int64_t) {}
void index_select(const Tensor&, int64_t, const Tensor&) {}
void index_add(const Shape&, int64_t, const Tensor&, const Tensor&) {}
void gather(const Tensor&, int64_t, const Tensor&) {}
void scatter_add(const Shape&, int64_t, const Tensor&, const Tensor&) {}
void attention(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const AttentionArgs&,
               const AttentionBuckets&, const AttentionIndexBias&) {}
void attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                        const AttentionOut&, const AttentionArgs&, const AttentionBuckets&, const Tensor&,
                        const AttentionIndexBias&) {}
void cross_entropy(const Tensor&, const Tensor&, int64_t, Reduction) {}
void cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, Reduction, int64_t) {}

}  // namespace relpos::k::check
