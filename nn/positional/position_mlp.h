// nn/positional/position_mlp.h — the small MLP of the functional position biases (FIRE,
// dynamic_bias): widths {in, w1, ..., out}, y = W x + b per layer with an activation between
// layers (none after the last). Weights [out, in] and biases [out] are initialised like
// PyTorch's nn.Linear, U(-1/sqrt(in), 1/sqrt(in)), as in the reference code, and registered
// in the position group ("<i>.weight", "<i>.bias").
#pragma once
#include <vector>

#include "core/rng.h"
#include "nn/module.h"

namespace relpos::nn {

class PositionMlp : public Module {
 public:
  enum class Act { Relu, Silu };
  PositionMlp(const std::vector<int64_t>& widths, Act act, Generator& gen, DType dtype);
  // x: [N, in] -> [N, out]
  Variable forward(const Variable& x) const;
  const std::vector<Variable>& weights() const { return w_; }
  const std::vector<Variable>& biases() const { return b_; }

 private:
  Act act_;
  std::vector<Variable> w_, b_;
};

}  // namespace relpos::nn
