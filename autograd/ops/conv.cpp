// autograd/ops/conv.cpp — depthwise 2D convolution on a channels-last grid (k::depthwise_conv2d).
//   forward:  x [B, H, W, C], w [C, k, k], bias [C] (or undefined) -> y [B, H, W, C]
//             y[b, i, j, c] = bias[c] + sum_{u, v} w[c, u, v] x[b, i + u - p, j + v - p, c], p = (k - 1) / 2
//   backward: g [B, H, W, C] -> dx [B, H, W, C], dw [C, k, k], dbias [C]
//             (k::depthwise_conv2d_backward: the transposed convolution of g for dx, the
//             correlation of g with x for dw, the sum of g for dbias)
#include "autograd/function.h"
#include "autograd/ops.h"

namespace relpos {

Variable depthwise_conv2d(const Variable& x, const Variable& w, const Variable& bias) {
  const Tensor b = bias.defined() ? bias.data() : Tensor();
  Tensor y = k::depthwise_conv2d(x.data(), w.data(), b);
  SavedTensor sx(x.data(), "depthwise_conv2d"), sw(w.data(), "depthwise_conv2d");
  const bool has_bias = b.defined();
  return make_result(y, "depthwise_conv2d", {x, w, bias}, [sx, sw, has_bias](const Tensor& g) -> std::vector<Tensor> {
    k::ConvGrads d = k::depthwise_conv2d_backward(g, sx.get(), sw.get(), has_bias);
    return {d.dx, d.dw, d.dbias};
  });
}

}  // namespace relpos
