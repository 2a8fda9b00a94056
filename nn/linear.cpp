#include "nn/linear.h"

#include <cmath>

#include "autograd/ops.h"
#include "nn/init.h"

namespace relpos::nn {

Linear::Linear(int64_t in, int64_t out, bool bias, Generator& gen, DType dtype) {
  RELPOS_CHECK(in > 0 && out > 0, "Linear: sizes must be positive, got in={} out={}", in, out);
  const double bound = 1.0 / std::sqrt(double(in));
  weight_ = register_parameter("weight", init::uniform({out, in}, bound, gen, dtype));
  if (bias) bias_ = register_parameter("bias", init::uniform({out}, bound, gen, dtype), group::kNormsAndBiases);
}

Variable Linear::forward(const Variable& x) const {
  return linear(x, weight_, bias_);
}

Variable Linear::forward(const Variable& x, const Variable& residual) const {
  return residual.defined() ? linear(x, weight_, bias_, residual) : linear(x, weight_, bias_);
}

Variable Linear::forward(const Variable& x, k::Unary act) const {
  return linear(x, weight_, bias_, act);
}

}  // namespace relpos::nn
