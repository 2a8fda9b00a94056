// nn/positional/positive_param.h — reparametrisations that keep a learned scalar in range
// (KERPLE): the optimizer updates an unconstrained raw value u, the model uses f(u).
//   softplus(u) = log(1 + exp(u)) in (0, inf)      inverse: u = log(exp(r) - 1)
//   2 sigmoid(u)                     in (0, 2)      inverse: u = log(r / (2 - r))
// softplus is evaluated as u for u > 30 (the two differ by < 1e-13 there), so exp never
// overflows; both are smooth, so float64 gradchecks hold everywhere.
#pragma once
#include <cmath>

#include "autograd/ops.h"

namespace relpos::nn {

inline Variable softplus(const Variable& u) {
  Tensor large = gt(u, Variable(Tensor::scalar(30.0, u.dtype(), u.data().device())));  // made on u's device
  return where(large, u, log(add(exp(clamp(u, -1e300, 30.0)), 1.0)));
}
inline double softplus_inverse(double r) { return r > 30 ? r : std::log(std::expm1(r)); }
inline double two_sigmoid_inverse(double r) { return std::log(r / (2.0 - r)); }

}  // namespace relpos::nn
