// autograd/ops/matmul.cpp — C = A @ B with A: [..., M, K], B: [..., K, N].
// Backward: dA = dC @ B^T, dB = A^T @ dC (transposed views go to BLAS as flags), then
// summed over broadcast batch dims. Under autocast (autograd/autocast.h) the inputs, the output
// and the gradients through them take 16-bit values; the products accumulate in float32. The
// inputs are rounded by the GEMMs themselves (k::GemmInputs: while packing them for the 16-bit
// units), not by autocast_round copies: the saved tensors are the unrounded inputs, which every
// GEMM of the backward rounds again; dA and dB are rounded here, as autocast_round's backward
// would.
#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/ops.h"

namespace relpos {

namespace {
Variable matmul_f32(const Variable& a, const Variable& b, k::GemmInputs in) {
  SavedTensor sa(a.data(), "matmul"), sb(b.data(), "matmul");
  bool ga = wants_grad(a), gb = wants_grad(b);
  return make_result(
      k::matmul(a.data(), b.data(), in), "matmul", {a, b},
      [sa, sb, ga, gb, in](const Tensor& g) -> std::vector<Tensor> {
        const Tensor &ta = sa.get(), &tb = sb.get();
        Tensor da, db;
        const auto round = [in](const Tensor& t) {  // the gradient of a 16-bit input, as autocast_round's
          if (in == k::GemmInputs::F32 || !t.defined()) return t;
          return k::unary(in == k::GemmInputs::BF16 ? k::Unary::RoundBF16 : k::Unary::RoundFP16, t);
        };
        if (ga) da = k::sum_to(k::matmul(g, tb.transpose(-1, -2), in), ta.shape());
        if (gb) {
          // Unbatched B with batched A: fold A's batch into rows (one GEMM).
          if (tb.dim() == 2 && ta.dim() > 2)
            db = k::matmul(ta.reshape({-1, ta.size(-1)}).transpose(0, 1), g.reshape({-1, g.size(-1)}), in);
          else
            db = k::sum_to(k::matmul(ta.transpose(-1, -2), g, in), tb.shape());
        }
        return {round(da), round(db)};
      });
}
}  // namespace

Variable matmul(const Variable& a, const Variable& b) {
  const Precision p = autocast_precision();
  if (p == Precision::FP32 || a.dtype() != DType::F32) return matmul_f32(a, b, k::GemmInputs::F32);
  return autocast_round(matmul_f32(a, b, gemm_inputs(p)));
}

}  // namespace relpos
