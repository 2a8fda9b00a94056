// nn/optim/optimizer.h — the one interface every optimizer implements (SGD, Adam, AdamW), so the
// trainer holds a `std::unique_ptr<Optimizer>` and never asks which one it has.
// Each optimizer takes ParamGroups (nn/optim/param_groups.h): per-group weight decay (0 for the
// config's no_decay tags) and lr multiplier. State (momentum, moments, steps) is exported as
// named copies for checkpoints; load_state_dict takes exactly what state_dict gave.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/enum_names.h"
#include "core/tensor.h"

namespace relpos::nn::optim {

// optim.name
enum class OptimizerKind { SGD, Adam, AdamW };

using OptimizerState = std::vector<std::pair<std::string, Tensor>>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step() = 0;             // one update of every parameter that has a grad
  virtual void zero_grad() = 0;        // drops every parameter's grad
  virtual void set_lr(double lr) = 0;  // base lr of the next step (each group: lr * lr_scale)
  virtual OptimizerState state_dict() const = 0;
  virtual void load_state_dict(const OptimizerState& state) = 0;
};

}  // namespace relpos::nn::optim

template <>
struct relpos::EnumTable<relpos::nn::optim::OptimizerKind> {
  static constexpr EnumName<nn::optim::OptimizerKind> items[] = {{nn::optim::OptimizerKind::SGD, "sgd"},
                                                                 {nn::optim::OptimizerKind::Adam, "adam"},
                                                                 {nn::optim::OptimizerKind::AdamW, "adamw"}};
};
