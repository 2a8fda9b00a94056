// autograd/ops/attention.cpp — fused scaled-dot-product attention with a Toeplitz position
// bias (kernels/cpu/attention.cpp), forward and backward side by side:
//   forward:  O = softmax(scale q k^T + T[h, j - i + Lq - 1], causal/padding masks) v
//   backward: dq, dk, dv, dT from the saved O and row logsumexp (scores recomputed)
#include "relpos/autograd/function.h"
#include "relpos/autograd/ops.h"

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

}  // namespace relpos
