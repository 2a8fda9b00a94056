// nn/optim/adam.h — Adam and AdamW, PyTorch 1.13 semantics (torch.optim.Adam/AdamW with
// amsgrad=False, maximize=False, the single-tensor path). For each parameter p with a grad g,
// in its group G (lr_G = lr * G.lr_scale, wd = G.weight_decay), at its own step t = t + 1:
//   Adam:   g = g + wd * p                          (L2 decay coupled into the gradient)
//   AdamW:  p = p * (1 - lr_G * wd)                 (decoupled decay, before the Adam update)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps       (eps added after the bias-corrected sqrt)
//   p = p - (lr_G / (1 - beta1^t)) * m / denom
// Parameters without a grad are skipped (their step t and moments do not change). The math
// runs in the parameter's dtype with the kernels of kernels/ops.h, in PyTorch's operation
// order; scalar coefficients are computed in double. Everything is sequential, so a step is
// a pure function of (params, grads, state) and reruns are bit-identical.
//
// State per parameter: step (int64), exp_avg m and exp_avg_sq v (param shape and dtype,
// zero until its first step). state_dict() exports it as copies under the keys
//   "<group name>.<index in group>.step"        int64 []   (0-d)
//   "<group name>.<index in group>.exp_avg"     param dtype, param shape
//   "<group name>.<index in group>.exp_avg_sq"  param dtype, param shape
// and load_state_dict() takes exactly that key set back (for bit-exact checkpoint resume).
// Hyperparameters (lr, betas, eps, weight decay) are not state: the caller recreates them.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "nn/optim/optimizer.h"
#include "nn/optim/param_groups.h"

namespace relpos::nn::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // Used only by the constructors that take a plain parameter list (one group "default");
  // with explicit ParamGroups each group's weight_decay applies.
  double weight_decay = 0.0;
};

// The shared implementation; use Adam or AdamW.
class AdamBase : public Optimizer {
 public:
  AdamBase(const AdamBase&) = delete;
  AdamBase& operator=(const AdamBase&) = delete;

  void step() override;       // one update of every parameter that has a grad
  void zero_grad() override;  // drops every parameter's grad
  // Base lr for the next step() (each group uses lr * lr_scale); finite and >= 0.
  void set_lr(double lr) override;
  double lr() const { return opt_.lr; }
  const AdamOptions& options() const { return opt_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  bool decoupled_weight_decay() const { return decoupled_; }
  // Steps taken so far by parameter `index` of group `group` (0 before its first grad).
  int64_t param_step(size_t group, size_t index) const;

  // Copies of the state, keys as in the header comment, groups and parameters in order.
  OptimizerState state_dict() const override;
  // Replaces the whole state. Every key must be present with the parameter's shape and
  // dtype (step: int64 0-d, >= 0), and no other key may be given; errors name the key (and
  // both shapes/dtypes) and leave the state unchanged. The tensors are copied in.
  void load_state_dict(const OptimizerState& state) override;

 protected:
  AdamBase(std::vector<ParamGroup> groups, AdamOptions opt, bool decoupled, const char* who);

 private:
  struct ParamState {
    int64_t step = 0;
    Tensor exp_avg, exp_avg_sq;  // undefined until the first step (exported as zeros)
  };
  std::string key(size_t group, size_t index, const char* field) const;

  std::vector<ParamGroup> groups_;
  std::vector<std::vector<ParamState>> state_;  // [group][index]
  AdamOptions opt_;
  bool decoupled_;
  const char* who_;
};

// Adam with L2 weight decay added to the gradient (torch.optim.Adam).
class Adam final : public AdamBase {
 public:
  Adam(std::vector<ParamGroup> groups, AdamOptions opt);
  Adam(std::vector<Variable> params, AdamOptions opt);  // one group "default", opt.weight_decay
};

// Adam with decoupled weight decay p *= 1 - lr * wd before the update (torch.optim.AdamW).
// Note: PyTorch's AdamW defaults to weight_decay 0.01; here it is whatever the options or
// groups say (AdamOptions defaults to 0).
class AdamW final : public AdamBase {
 public:
  AdamW(std::vector<ParamGroup> groups, AdamOptions opt);
  AdamW(std::vector<Variable> params, AdamOptions opt);  // one group "default", opt.weight_decay
};

}  // namespace relpos::nn::optim
