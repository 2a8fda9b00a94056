// autograd/ops/toeplitz.cpp — scores + distance-only bias in Toeplitz form.
//   forward:  S'[b,h,i,j] = S[b,h,i,j] + T[h, j - i + Lq - 1]
//   backward: dS = g;  dT[h,t] = sum over b and the diagonal j - i + Lq - 1 = t of g
// Masked cells reach here with g = 0 (masked_fill's backward), so they add nothing to dT.
#include "autograd/function.h"
#include "autograd/ops.h"

namespace relpos {

Variable add_toeplitz_bias(const Variable& scores, const Variable& bias) {
  return make_result(k::toeplitz_add(scores.data(), bias.data()), "add_toeplitz_bias", {scores, bias},
                     [](const Tensor& g) -> std::vector<Tensor> { return {g, k::toeplitz_diag_sum(g)}; });
}

}  // namespace relpos
