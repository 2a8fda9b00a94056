// kernels/dispatch.cpp — the dispatch layer: every public op of kernels/ops.h checks that its
// tensor inputs share one device and forwards to that device's backend (candle's shape: one
// switch per op, no virtual tensor backend). Validation of shapes and dtypes is the
// backend's job, so a message is the same whichever device raised it.
#include <array>

#include "kernels/backend.h"

namespace relpos::k {

namespace {

// The device every defined tensor in ts sits on; CPU when none is defined (the backend then
// reports the undefined input). Mixed devices: an error naming the op and both operands.
template <typename... Ts>
Device device_of(const char* op, const Ts&... ts) {
  const Tensor* first = nullptr;
  Device dev = Device::CPU;
  auto visit = [&](const Tensor& t) {
    if (!t.defined()) return;
    if (!first) {
      first = &t;
      dev = t.device();
      return;
    }
    RELPOS_CHECK(t.device() == dev, "{}: inputs on different devices: {} and {} (move them with .to(Device))", op,
                 describe(*first), describe(t));
  };
  (visit(ts), ...);
  return dev;
}

}  // namespace

// One line per op: pick the backend by device, forward the arguments unchanged.
#define RELPOS_DISPATCH(dev, call) ((dev) == Device::CUDA ? cuda::call : cpu::call)

Tensor unary(Unary op, const Tensor& x, double p, double q) {
  return RELPOS_DISPATCH(device_of("unary op", x), unary(op, x, p, q));
}
Tensor unary_grad(Unary deriv, const Tensor& g, const Tensor& x, double p, double q) {
  return RELPOS_DISPATCH(device_of("unary_grad", g, x), unary_grad(deriv, g, x, p, q));
}
Tensor binary(Binary op, const Tensor& a, const Tensor& b) {
  return RELPOS_DISPATCH(device_of("binary op", a, b), binary(op, a, b));
}
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return RELPOS_DISPATCH(device_of("where", cond, a, b), where(cond, a, b));
}
Tensor causal_fill(const Tensor& x, int64_t q_offset, int64_t k_offset, double value) {
  return RELPOS_DISPATCH(device_of("causal_fill", x), causal_fill(x, q_offset, k_offset, value));
}
void add_(const Tensor& dst, const Tensor& src, double alpha) {
  RELPOS_DISPATCH(device_of("add_", dst, src), add_(dst, src, alpha));
}
void mul_(const Tensor& dst, double s) { RELPOS_DISPATCH(device_of("mul_", dst), mul_(dst, s)); }

Tensor reduce(Reduce op, const Tensor& x, std::vector<int64_t> dims, bool keepdim, int64_t correction) {
  return RELPOS_DISPATCH(device_of("reduce", x), reduce(op, x, std::move(dims), keepdim, correction));
}
Tensor sum_squares(const Tensor& x) { return RELPOS_DISPATCH(device_of("sum_squares", x), sum_squares(x)); }

Tensor matmul(const Tensor& a, const Tensor& b) { return RELPOS_DISPATCH(device_of("matmul", a, b), matmul(a, b)); }

Tensor softmax(const Tensor& x, int64_t dim) { return RELPOS_DISPATCH(device_of("softmax", x), softmax(x, dim)); }
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return RELPOS_DISPATCH(device_of("log_softmax", x), log_softmax(x, dim));
}
Tensor softmax_backward(const Tensor& y, const Tensor& gy, int64_t dim) {
  return RELPOS_DISPATCH(device_of("softmax_backward", y, gy), softmax_backward(y, gy, dim));
}
Tensor log_softmax_backward(const Tensor& y, const Tensor& gy, int64_t dim) {
  return RELPOS_DISPATCH(device_of("log_softmax_backward", y, gy), log_softmax_backward(y, gy, dim));
}

NormOut layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  return RELPOS_DISPATCH(device_of("layer_norm", x, weight, bias), layer_norm(x, weight, bias, eps));
}
NormOut rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  return RELPOS_DISPATCH(device_of("rms_norm", x, weight), rms_norm(x, weight, eps));
}
NormGrads layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                              const Tensor& weight, bool has_bias) {
  return RELPOS_DISPATCH(device_of("layer_norm_backward", gy, x, mean, rstd, weight),
                         layer_norm_backward(gy, x, mean, rstd, weight, has_bias));
}
NormGrads rms_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& rstd, const Tensor& weight) {
  return RELPOS_DISPATCH(device_of("rms_norm_backward", gy, x, rstd, weight), rms_norm_backward(gy, x, rstd, weight));
}

Tensor embedding(const Tensor& weight, const Tensor& idx) {
  return RELPOS_DISPATCH(device_of("embedding", weight, idx), embedding(weight, idx));
}
Tensor embedding_backward(const Tensor& gy, const Tensor& idx, int64_t num_rows) {
  return RELPOS_DISPATCH(device_of("embedding_backward", gy, idx), embedding_backward(gy, idx, num_rows));
}
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& idx) {
  return RELPOS_DISPATCH(device_of("index_select", x, idx), index_select(x, dim, idx));
}
Tensor index_add(const Shape& shape, int64_t dim, const Tensor& idx, const Tensor& src) {
  return RELPOS_DISPATCH(device_of("index_add", src, idx), index_add(shape, dim, idx, src));
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx) {
  return RELPOS_DISPATCH(device_of("gather", x, idx), gather(x, dim, idx));
}
Tensor scatter_add(const Shape& shape, int64_t dim, const Tensor& idx, const Tensor& src) {
  return RELPOS_DISPATCH(device_of("scatter_add", src, idx), scatter_add(shape, dim, idx, src));
}

AttentionOut attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                       const Tensor& key_padding, const AttentionArgs& a, const AttentionBuckets& buckets,
                       const AttentionIndexBias& index_bias) {
  return RELPOS_DISPATCH(device_of("attention", q, k, v, bias, key_padding, buckets.qr, buckets.bucket,
                                   index_bias.table, index_bias.index),
                         attention(q, k, v, bias, key_padding, a, buckets, index_bias));
}
AttentionGrads attention_backward(const Tensor& g_o, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& bias, const Tensor& key_padding, const AttentionOut& fwd,
                                  const AttentionArgs& a, const AttentionBuckets& buckets, const Tensor& g_w,
                                  const AttentionIndexBias& index_bias) {
  return RELPOS_DISPATCH(device_of("attention_backward", g_o, q, k, v, bias, key_padding, fwd.o, fwd.lse, fwd.w,
                                   buckets.qr, buckets.bucket, g_w, index_bias.table, index_bias.index),
                         attention_backward(g_o, q, k, v, bias, key_padding, fwd, a, buckets, g_w, index_bias));
}

Tensor toeplitz_add(const Tensor& s, const Tensor& t) {
  return RELPOS_DISPATCH(device_of("toeplitz_add", s, t), toeplitz_add(s, t));
}
Tensor toeplitz_diag_sum(const Tensor& ds) {
  return RELPOS_DISPATCH(device_of("toeplitz_diag_sum", ds), toeplitz_diag_sum(ds));
}
Tensor rotary(const Tensor& x, const Tensor& cs, bool interleaved, bool inverse) {
  return RELPOS_DISPATCH(device_of("rotary", x, cs), rotary(x, cs, interleaved, inverse));
}

Tensor dropout_mask(const Shape& shape, double p, Generator& gen, DType dtype, Device device) {
  return RELPOS_DISPATCH(device, dropout_mask(shape, p, gen, dtype));
}

CrossEntropyOut cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                              Reduction reduction) {
  return RELPOS_DISPATCH(device_of("cross_entropy", logits, target),
                         cross_entropy(logits, target, ignore_index, reduction));
}
Tensor cross_entropy_backward(const Tensor& g, const Tensor& logits, const Tensor& lse, const Tensor& target,
                              int64_t ignore_index, Reduction reduction, int64_t count) {
  return RELPOS_DISPATCH(device_of("cross_entropy_backward", g, logits, lse, target),
                         cross_entropy_backward(g, logits, lse, target, ignore_index, reduction, count));
}

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const AdamStep& s) {
  RELPOS_DISPATCH(device_of("adam_update", param, grad, exp_avg, exp_avg_sq),
                  adam_update(param, grad, exp_avg, exp_avg_sq, s));
}

#undef RELPOS_DISPATCH

}  // namespace relpos::k
