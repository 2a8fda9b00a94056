// nn/optim/sgd.cpp — see sgd.h.
#include "nn/optim/sgd.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "kernels/ops.h"

namespace relpos::nn::optim {

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions opt) : groups_(std::move(groups)), opt_(opt) {
  RELPOS_CHECK(std::isfinite(opt.lr) && opt.lr > 0, "SGD: lr must be positive, got {}", opt.lr);
  RELPOS_CHECK(opt.momentum >= 0 && opt.momentum < 1, "SGD: momentum must be in [0, 1), got {}", opt.momentum);
  validate_param_groups(groups_, "SGD");
  for (const ParamGroup& g : groups_) momentum_.emplace_back(g.params.size());
}

SGD::SGD(std::vector<Variable> params, SGDOptions opt)
    : SGD(std::vector<ParamGroup>{{std::move(params), opt.weight_decay, 1.0, "default"}}, opt) {}

void SGD::step() {
  NoGradGuard ng;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& group = groups_[gi];
    for (size_t i = 0; i < group.params.size(); ++i) {
      const Variable& p = group.params[i];
      if (!p.grad().defined()) continue;
      Tensor g = p.grad();
      if (group.weight_decay != 0.0) {
        g = g.clone();
        k::add_(g, p.data(), group.weight_decay);
      }
      if (opt_.momentum > 0.0) {
        Tensor& buf = momentum_[gi][i];
        if (!buf.defined()) {
          buf = g.clone();
        } else {
          if (buf.device() != g.device()) buf = buf.to(g.device());  // model moved
          k::mul_(buf, opt_.momentum);
          k::add_(buf, g, 1.0);
        }
        g = buf;
      }
      k::add_(p.data(), g, -opt_.lr * group.lr_scale);
    }
  }
}

OptimizerState SGD::state_dict() const {
  OptimizerState out;
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (size_t i = 0; i < momentum_[gi].size(); ++i)
      if (momentum_[gi][i].defined())
        out.emplace_back(groups_[gi].name + "." + std::to_string(i) + ".momentum_buffer", momentum_[gi][i].clone());
  return out;
}

void SGD::load_state_dict(const OptimizerState& state) {
  std::vector<std::vector<Tensor>> loaded;
  for (const ParamGroup& g : groups_) loaded.emplace_back(g.params.size());
  for (const auto& [key, t] : state) {
    bool found = false;
    for (size_t gi = 0; gi < groups_.size() && !found; ++gi)
      for (size_t i = 0; i < groups_[gi].params.size() && !found; ++i) {
        if (key != groups_[gi].name + "." + std::to_string(i) + ".momentum_buffer") continue;
        const Variable& p = groups_[gi].params[i];
        RELPOS_CHECK(t.shape() == p.shape() && t.dtype() == p.dtype(), "SGD state: '{}' is {}, parameter is {}", key,
                     describe(t), describe(p.data()));
        loaded[gi][i] = t.device() == p.device() ? t.clone() : t.to(p.device());
        found = true;
      }
    RELPOS_CHECK(found, "SGD state: unexpected key '{}' (expected <group>.<index>.momentum_buffer)", key);
  }
  momentum_ = std::move(loaded);
}

void SGD::zero_grad() {
  for (const ParamGroup& g : groups_)
    for (const Variable& p : g.params) p.zero_grad();
}

}  // namespace relpos::nn::optim
