// nn/optim/sgd.h — SGD with momentum and (coupled) weight decay, PyTorch semantics, per
// parameter group G (nn/optim/param_groups.h; the trainer's groups give no_decay tags wd 0):
//   g = grad + wd_G * p;  buf = momentum * buf + g  (buf = g on the first step);
//   p -= lr * lr_scale_G * buf
// State: "<group name>.<index in group>.momentum_buffer" for every parameter that has stepped
// with momentum > 0; load_state_dict takes such keys back (shapes and dtypes checked).
#pragma once
#include <vector>

#include "autograd/variable.h"
#include "nn/optim/optimizer.h"
#include "nn/optim/param_groups.h"

namespace relpos::nn::optim {

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  // Used only by the constructor that takes a plain parameter list (one group "default");
  // with explicit ParamGroups each group's weight_decay applies.
  double weight_decay = 0.0;
};

class SGD final : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, SGDOptions opt);
  SGD(std::vector<Variable> params, SGDOptions opt);  // one group "default", opt.weight_decay
  void step() override;                               // parameters without a grad are skipped
  void zero_grad() override;                          // drops every parameter's grad
  void set_lr(double lr) override { opt_.lr = lr; }
  const SGDOptions& options() const { return opt_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  OptimizerState state_dict() const override;
  void load_state_dict(const OptimizerState& state) override;

 private:
  std::vector<ParamGroup> groups_;
  std::vector<std::vector<Tensor>> momentum_;  // [group][index]; undefined until its first step
  SGDOptions opt_;
};

}  // namespace relpos::nn::optim
