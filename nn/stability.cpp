// nn/stability.cpp — softcap and z-loss (see stability.h), composed of autograd ops.
#include "nn/stability.h"

#include "autograd/ops.h"
#include "core/error.h"

namespace relpos::nn {

Variable softcap(const Variable& s, double c) {
  RELPOS_CHECK(c > 0, "softcap: the cap must be > 0, got {}", c);
  return tanh(s * (1.0 / c)) * c;
}

Variable z_loss(const Variable& logits) {
  Variable lse = logsumexp(logits, {-1}, false);  // [...]
  return mean(lse * lse);
}

}  // namespace relpos::nn
