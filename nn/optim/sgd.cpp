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
        k::mul_(momentum_[i], opt_.momentum);
        k::add_(momentum_[i], g);
      }
      g = momentum_[i];
    }
    k::add_(p.data(), g, -opt_.lr);
  }
}

void SGD::zero_grad() {
  for (const Variable& p : params_) p.zero_grad();
}

}  // namespace relpos::nn::optim
