#include "nn/positional/position_mlp.h"

#include <cmath>
#include <string>

#include "autograd/ops.h"
#include "nn/init.h"

namespace relpos::nn {

PositionMlp::PositionMlp(const std::vector<int64_t>& widths, Act act, Generator& gen, DType dtype) : act_(act) {
  RELPOS_CHECK(widths.size() >= 2, "position MLP: needs at least an input and an output width");
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const int64_t in = widths[i], out = widths[i + 1];
    RELPOS_CHECK(in > 0 && out > 0, "position MLP: widths must be positive, got {} -> {}", in, out);
    const double bound = 1.0 / std::sqrt(double(in));
    w_.push_back(register_parameter(std::to_string(i) + ".weight", init::uniform({out, in}, bound, gen, dtype),
                                    group::kPosition));
    b_.push_back(
        register_parameter(std::to_string(i) + ".bias", init::uniform({out}, bound, gen, dtype), group::kPosition));
  }
}

Variable PositionMlp::forward(const Variable& x) const {
  Variable h = x;
  for (size_t i = 0; i < w_.size(); ++i) {
    h = matmul(h, transpose(w_[i], 0, 1)) + b_[i];
    if (i + 1 < w_.size()) h = act_ == Act::Relu ? relu(h) : silu(h);
  }
  return h;
}

}  // namespace relpos::nn
