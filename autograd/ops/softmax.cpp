// autograd/ops/softmax.cpp — softmax and log_softmax along a dim.
// Backward from the saved output y:
//   softmax:     dx = y * (g - sum(g * y))
//   log_softmax: dx = g - exp(y) * sum(g)
#include "autograd/function.h"
#include "autograd/ops.h"

namespace relpos {

Variable softmax(const Variable& x, int64_t dim) {
  Tensor y = k::softmax(x.data(), dim);
  SavedTensor sy(y, "softmax");
  return make_result(y, "softmax", {x}, [sy, dim](const Tensor& g) -> std::vector<Tensor> {
    return {k::softmax_backward(sy.get(), g, dim)};
  });
}

Variable log_softmax(const Variable& x, int64_t dim) {
  Tensor y = k::log_softmax(x.data(), dim);
  SavedTensor sy(y, "log_softmax");
  return make_result(y, "log_softmax", {x}, [sy, dim](const Tensor& g) -> std::vector<Tensor> {
    return {k::log_softmax_backward(sy.get(), g, dim)};
  });
}

}  // namespace relpos
