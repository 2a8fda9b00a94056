// autograd/ops/attention.cpp — fused scaled-dot-product attention with a Toeplitz position
// bias (kernels/cpu/attention.cpp), forward and backward side by side:
//   forward:  O = softmax(scale q k^T + T[h, j - i + Lq - 1], causal/padding masks) v
//   backward: dq, dk, dv, dT from the saved O and row logsumexp (scores recomputed)
// and its bucketed variant (Shaw): S += scale qr[i, bucket], output [O | w], w = P per bucket;
//   backward: also dqr, with w's gradient entering dP
// and its index-bias variant (Swin 2D, Graphormer): S += table[index[(b,) i, j], h];
//   backward: also dtable (each table row's cells of dS, summed)
#include "autograd/function.h"
#include "autograd/ops.h"

namespace relpos {

Variable fused_attention(const Variable& q, const Variable& k, const Variable& v, const Variable& bias,
                         const Tensor& key_padding, const k::AttentionArgs& args, k::AttentionOut* forward) {
  const Tensor bias_t = bias.defined() ? bias.data() : Tensor();
  k::AttentionOut fwd = k::attention(q.data(), k.data(), v.data(), bias_t, key_padding, args);
  if (forward) *forward = fwd;
  fwd.max_abs = fwd.entropy = Tensor();  // the backward needs o and lse only
  Tensor o = fwd.o;
  return make_result(std::move(o), "fused_attention", {q, k, v, bias},
                     [q = q.data(), kk = k.data(), v = v.data(), bias_t, key_padding, fwd,
                      args](const Tensor& g) -> std::vector<Tensor> {
                       k::AttentionGrads gr = k::attention_backward(g, q, kk, v, bias_t, key_padding, fwd, args);
                       return {gr.dq, gr.dk, gr.dv, gr.dbias};
                     });
}

Variable fused_attention_buckets(const Variable& q, const Variable& k, const Variable& v, const Variable& bias,
                                 const Variable& qr, const Tensor& bucket, const Tensor& key_padding,
                                 const k::AttentionArgs& args, k::AttentionOut* forward) {
  const Tensor bias_t = bias.defined() ? bias.data() : Tensor();
  const k::AttentionBuckets bk{qr.data(), bucket};
  k::AttentionOut fwd = k::attention(q.data(), k.data(), v.data(), bias_t, key_padding, args, bk);
  if (forward) *forward = fwd;
  fwd.max_abs = fwd.entropy = Tensor();
  const int64_t dh = fwd.o.size(3), nb = fwd.w.size(3);
  Tensor out = k::cat({fwd.o, fwd.w}, 3);  // [B, H, Lq, dh + NB]
  return make_result(std::move(out), "fused_attention_buckets", {q, k, v, bias, qr},
                     [q = q.data(), kk = k.data(), v = v.data(), bias_t, bk, key_padding, fwd, args, dh,
                      nb](const Tensor& g) -> std::vector<Tensor> {
                       const std::vector<Tensor> parts = k::split(g, {dh, nb}, 3);  // views
                       k::AttentionGrads gr =
                           k::attention_backward(parts[0], q, kk, v, bias_t, key_padding, fwd, args, bk, parts[1]);
                       return {gr.dq, gr.dk, gr.dv, gr.dbias, gr.dqr};
                     });
}

Variable fused_attention_indexed(const Variable& q, const Variable& k, const Variable& v, const Variable& bias,
                                 const Variable& table, const Tensor& index, const Tensor& key_padding,
                                 const k::AttentionArgs& args, k::AttentionOut* forward) {
  const Tensor bias_t = bias.defined() ? bias.data() : Tensor();
  const k::AttentionIndexBias ib{table.data(), index};
  k::AttentionOut fwd = k::attention(q.data(), k.data(), v.data(), bias_t, key_padding, args, {}, ib);
  if (forward) *forward = fwd;
  fwd.max_abs = fwd.entropy = Tensor();  // the backward needs o and lse only
  Tensor o = fwd.o;
  return make_result(std::move(o), "fused_attention_indexed", {q, k, v, bias, table},
                     [q = q.data(), kk = k.data(), v = v.data(), bias_t, ib, key_padding, fwd,
                      args](const Tensor& g) -> std::vector<Tensor> {
                       k::AttentionGrads gr =
                           k::attention_backward(g, q, kk, v, bias_t, key_padding, fwd, args, {}, Tensor(), ib);
                       return {gr.dq, gr.dk, gr.dv, gr.dbias, gr.dtable};
                     });
}

}  // namespace relpos
