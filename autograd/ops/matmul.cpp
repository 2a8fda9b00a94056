// autograd/ops/matmul.cpp — C = A @ B with A: [..., M, K], B: [..., K, N].
// Backward: dA = dC @ B^T, dB = A^T @ dC (transposed views go to BLAS as flags), then
// summed over broadcast batch dims. Under autocast (autograd/autocast.h) the inputs, the output
// and the gradients through them take 16-bit values; the products accumulate in float32.
#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/ops.h"

namespace relpos {

namespace {
Variable matmul_f32(const Variable& a, const Variable& b) {
  SavedTensor sa(a.data(), "matmul"), sb(b.data(), "matmul");
  bool ga = wants_grad(a), gb = wants_grad(b);
  return make_result(k::matmul(a.data(), b.data()), "matmul", {a, b},
                     [sa, sb, ga, gb](const Tensor& g) -> std::vector<Tensor> {
                       const Tensor &ta = sa.get(), &tb = sb.get();
                       Tensor da, db;
                       if (ga) da = k::sum_to(k::matmul(g, tb.transpose(-1, -2)), ta.shape());
                       if (gb) {
                         // Unbatched B with batched A: fold A's batch into rows (one GEMM).
                         if (tb.dim() == 2 && ta.dim() > 2)
                           db = k::matmul(ta.reshape({-1, ta.size(-1)}).transpose(0, 1),
                                          g.reshape({-1, g.size(-1)}));
                         else
                           db = k::sum_to(k::matmul(ta.transpose(-1, -2), g), tb.shape());
                       }
                       return {da, db};
                     });
}
}  // namespace

Variable matmul(const Variable& a, const Variable& b) {
  if (autocast_precision() == Precision::FP32) return matmul_f32(a, b);
  return autocast_round(matmul_f32(autocast_round(a), autocast_round(b)));
}

}  // namespace relpos
