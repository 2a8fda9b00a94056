// nn/stability.cpp — softcap and z-loss (see stability.h), composed of autograd ops; the
// finite mask of the NaN/inf monitors.
#include "nn/stability.h"

#include <limits>

#include "autograd/ops.h"
#include "core/error.h"
#include "kernels/ops.h"

namespace relpos::nn {

Variable softcap(const Variable& s, double c) {
  RELPOS_CHECK(c > 0, "softcap: the cap must be > 0, got {}", c);
  return tanh(s * (1.0 / c)) * c;
}

Variable z_loss(const Variable& logits) {
  Variable lse = logsumexp(logits, {-1}, false);  // [...]
  return mean(lse * lse);
}

Tensor finite_mask(const Tensor& abs_x) {
  return k::binary(k::Binary::Lt, abs_x,
                   Tensor::scalar(std::numeric_limits<double>::infinity(), abs_x.dtype(), abs_x.device()));
}

}  // namespace relpos::nn
