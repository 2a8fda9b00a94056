// autograd/ops/loss.cpp — fused cross-entropy (log-softmax + NLL, ignore_index,
// mean/sum/none). Backward: dlogits = g * (softmax(logits) - onehot(target)) / count.
#include "autograd/function.h"
#include "autograd/ops.h"

namespace relpos {

Variable cross_entropy(const Variable& logits, const Tensor& target, int64_t ignore_index,
                       k::Reduction reduction) {
  k::CrossEntropyOut o = k::cross_entropy(logits.data(), target, ignore_index, reduction);
  SavedTensor sl(logits.data(), "cross_entropy");
  Tensor lse = o.lse, tg = target;
  int64_t count = o.count;
  return make_result(o.loss, "cross_entropy", {logits},
                     [sl, lse, tg, ignore_index, reduction, count](const Tensor& g) -> std::vector<Tensor> {
                       return {k::cross_entropy_backward(g, sl.get(), lse, tg, ignore_index, reduction, count)};
                     });
}

}  // namespace relpos
