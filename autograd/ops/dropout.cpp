// autograd/ops/dropout.cpp — inverted dropout: y = x * m, m in {0, 1/(1-p)} drawn from a
// seeded Generator; backward dx = g * m.
#include "autograd/function.h"
#include "autograd/ops.h"

namespace relpos {

Variable dropout(const Variable& x, double p, bool training, Generator& gen) {
  RELPOS_CHECK(p >= 0.0 && p < 1.0, "dropout: p must be in [0, 1), got {}", p);
  if (!training || p == 0.0) return x;
  Tensor m = k::dropout_mask(x.shape(), p, gen, x.dtype(), x.data().device());
  return make_result(k::mul(x.data(), m), "dropout", {x},
                     [m](const Tensor& g) -> std::vector<Tensor> { return {k::mul(g, m)}; });
}

}  // namespace relpos
