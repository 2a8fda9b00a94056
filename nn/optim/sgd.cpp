#include "nn/optim/sgd.h"

#include "autograd/grad_mode.h"
#include "kernels/ops.h"

namespace relpos::nn::optim {

SGD::SGD(std::vector<Variable> params, SGDOptions opt)
    : params_(std::move(params)), momentum_(params_.size()), opt_(opt) {
  RELPOS_CHECK(opt.lr > 0, "SGD: lr must be positive, got {}", opt.lr);
  RELPOS_CHECK(opt.momentum >= 0 && opt.momentum < 1, "SGD: momentum must be in [0, 1), got {}", opt.momentum);
}

void SGD::step() {
  NoGradGuard ng;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Variable& p = params_[i];
    if (!p.grad().defined()) continue;
    Tensor g = p.grad();
    if (opt_.weight_decay != 0.0) {
      g = g.clone();
      k::add_(g, p.data(), opt_.weight_decay);
    }
    if (opt_.momentum > 0.0) {
      if (!momentum_[i].defined()) {
        momentum_[i] = g.clone();
      } else {
        if (momentum_[i].device() != g.device()) momentum_[i] = momentum_[i].to(g.device());  // model moved
        k::mul_(momentum_[i], opt_.momentum);
        k::add_(momentum_[i], g);
      }
      g = momentum_[i];
    }
    k::add_(p.data(), g, -opt_.lr);
  }
}

std::vector<std::pair<std::string, Tensor>> SGD::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < momentum_.size(); ++i)
    if (momentum_[i].defined()) out.emplace_back(std::to_string(i) + ".momentum_buffer", momentum_[i].clone());
  return out;
}

void SGD::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  std::vector<Tensor> loaded(params_.size());
  for (const auto& [key, t] : state) {
    size_t dot = key.find('.');
    RELPOS_CHECK(dot != std::string::npos && key.substr(dot) == ".momentum_buffer",
                 "SGD state: unexpected key '{}'", key);
    size_t i = std::stoul(key.substr(0, dot));
    RELPOS_CHECK(i < params_.size(), "SGD state: '{}' refers to parameter {} of {}", key, i, params_.size());
    RELPOS_CHECK(t.shape() == params_[i].shape() && t.dtype() == params_[i].dtype(),
                 "SGD state: '{}' is {}, parameter is {}", key, describe(t), describe(params_[i].data()));
    loaded[i] = t.device() == params_[i].device() ? t.clone() : t.to(params_[i].device());
  }
  momentum_ = std::move(loaded);
}

void SGD::zero_grad() {
  for (const Variable& p : params_) p.zero_grad();
}

}  // namespace relpos::nn::optim
