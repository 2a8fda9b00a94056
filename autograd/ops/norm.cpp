// autograd/ops/norm.cpp — LayerNorm / RMSNorm over the last dim; the fused kernels in
// kernels/cpu/norm.cpp hold both formulas (forward saves mean and rstd per row).
#include "autograd/function.h"
#include "autograd/ops.h"

namespace relpos {

Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, double eps) {
  Tensor w = weight.defined() ? weight.data() : Tensor();
  Tensor b = bias.defined() ? bias.data() : Tensor();
  k::NormOut o = k::layer_norm(x.data(), w, b, eps);
  SavedTensor sx(x.data(), "layer_norm"), sw(w, "layer_norm");
  Tensor mean = o.mean, rstd = o.rstd;
  bool has_bias = b.defined();
  return make_result(o.y, "layer_norm", {x, weight, bias},
                     [sx, sw, mean, rstd, has_bias](const Tensor& g) -> std::vector<Tensor> {
                       k::NormGrads d = k::layer_norm_backward(g, sx.get(), mean, rstd, sw.get(), has_bias);
                       return {d.dx, d.dweight, d.dbias};
                     });
}

Variable rms_norm(const Variable& x, const Variable& weight, double eps) {
  Tensor w = weight.defined() ? weight.data() : Tensor();
  k::NormOut o = k::rms_norm(x.data(), w, eps);
  SavedTensor sx(x.data(), "rms_norm"), sw(w, "rms_norm");
  Tensor rstd = o.rstd;
  return make_result(o.y, "rms_norm", {x, weight}, [sx, sw, rstd](const Tensor& g) -> std::vector<Tensor> {
    k::NormGrads d = k::rms_norm_backward(g, sx.get(), rstd, sw.get());
    return {d.dx, d.dweight};
  });
}

}  // namespace relpos
