#include "nn/optim/adam.h"

#include <cmath>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "kernels/ops.h"

namespace relpos::nn::optim {

namespace {

void check_options(const AdamOptions& o, const char* who) {
  RELPOS_CHECK(std::isfinite(o.lr) && o.lr >= 0, "{}: lr must be finite and >= 0, got {}", who, o.lr);
  RELPOS_CHECK(o.beta1 >= 0 && o.beta1 < 1, "{}: beta1 must be in [0, 1), got {}", who, o.beta1);
  RELPOS_CHECK(o.beta2 >= 0 && o.beta2 < 1, "{}: beta2 must be in [0, 1), got {}", who, o.beta2);
  RELPOS_CHECK(std::isfinite(o.eps) && o.eps >= 0, "{}: eps must be finite and >= 0, got {}", who, o.eps);
  RELPOS_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0,
               "{}: weight_decay must be finite and >= 0, got {}", who, o.weight_decay);
}

std::vector<ParamGroup> single_group(std::vector<Variable> params, const AdamOptions& opt) {
  return {ParamGroup{std::move(params), opt.weight_decay, 1.0, "default"}};
}

}  // namespace

AdamBase::AdamBase(std::vector<ParamGroup> groups, AdamOptions opt, bool decoupled, const char* who)
    : groups_(std::move(groups)), opt_(opt), decoupled_(decoupled), who_(who) {
  check_options(opt_, who_);
  validate_param_groups(groups_, who_);
  for (const ParamGroup& g : groups_) state_.emplace_back(g.params.size());
}

void AdamBase::set_lr(double lr) {
  RELPOS_CHECK(std::isfinite(lr) && lr >= 0, "{}: set_lr: lr must be finite and >= 0, got {}", who_, lr);
  opt_.lr = lr;
}

int64_t AdamBase::param_step(size_t group, size_t index) const {
  RELPOS_CHECK(group < state_.size() && index < state_[group].size(),
               "{}: param_step: no parameter {} in group {}", who_, index, group);
  return state_[group][index].step;
}

void AdamBase::step() {
  NoGradGuard no_grad;
  const double beta1 = opt_.beta1, beta2 = opt_.beta2;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& group = groups_[gi];
    const double lr = opt_.lr * group.lr_scale;
    const double wd = group.weight_decay;
    for (size_t i = 0; i < group.params.size(); ++i) {
      const Variable& p = group.params[i];
      const Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      const Tensor& data = p.data();
      RELPOS_CHECK(grad.shape() == data.shape() && grad.dtype() == data.dtype() && grad.device() == data.device(),
                   "{}: group '{}' parameter {} ('{}'): grad {} does not match the parameter {}", who_,
                   group.name, i, p.name(), describe(grad), describe(data));
      ParamState& s = state_[gi][i];
      if (!s.exp_avg.defined()) {
        s.exp_avg = Tensor::zeros(data.shape(), data.dtype(), data.device());
        s.exp_avg_sq = Tensor::zeros(data.shape(), data.dtype(), data.device());
      } else if (s.exp_avg.device() != data.device()) {  // the model moved (Module::to): state follows
        s.exp_avg = s.exp_avg.to(data.device());
        s.exp_avg_sq = s.exp_avg_sq.to(data.device());
      }
      s.step += 1;

      // One fused kernel per parameter (kernels/cpu/optim.cpp, kernels/cuda/optim.cu):
      //   AdamW: p *= 1 - lr wd          Adam: g = grad + wd p (grad itself untouched)
      //   m = b1 m + (1 - b1) g;  v = b2 v + ((1 - b2) g) g        (PyTorch's addcmul_ order)
      //   p += (-lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)         (PyTorch's addcdiv_ order)
      const double t = double(s.step);
      k::adam_update(data, grad, s.exp_avg, s.exp_avg_sq,
                     k::AdamStep{lr, beta1, beta2, opt_.eps, wd, decoupled_, 1.0 - std::pow(beta1, t),
                                 1.0 - std::pow(beta2, t)});
    }
  }
}

void AdamBase::zero_grad() {
  for (const ParamGroup& g : groups_)
    for (const Variable& p : g.params) p.zero_grad();
}

std::string AdamBase::key(size_t group, size_t index, const char* field) const {
  return fmt::format("{}.{}.{}", groups_[group].name, index, field);
}

OptimizerState AdamBase::state_dict() const {
  OptimizerState out;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (size_t i = 0; i < groups_[gi].params.size(); ++i) {
      const ParamState& s = state_[gi][i];
      const Tensor& data = groups_[gi].params[i].data();
      auto moment = [&](const Tensor& m) {
        return m.defined() ? m.clone() : Tensor::zeros(data.shape(), data.dtype(), data.device());
      };
      out.emplace_back(key(gi, i, "step"), Tensor::scalar(double(s.step), DType::I64));
      out.emplace_back(key(gi, i, "exp_avg"), moment(s.exp_avg));
      out.emplace_back(key(gi, i, "exp_avg_sq"), moment(s.exp_avg_sq));
    }
  }
  return out;
}

void AdamBase::load_state_dict(const OptimizerState& state) {
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [name, t] : state) {
    RELPOS_CHECK(given.emplace(name, &t).second, "{}: load_state_dict: key '{}' given twice", who_, name);
    RELPOS_CHECK(t.defined(), "{}: load_state_dict: key '{}' holds an undefined tensor", who_, name);
  }
  // Check everything before touching the state, so a failed load changes nothing.
  std::vector<std::vector<ParamState>> next(groups_.size());
  size_t used = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (size_t i = 0; i < groups_[gi].params.size(); ++i) {
      const Tensor& data = groups_[gi].params[i].data();
      auto find = [&](const char* field) -> const Tensor& {
        const std::string k = key(gi, i, field);
        auto it = given.find(k);
        RELPOS_CHECK(it != given.end(), "{}: load_state_dict: missing key '{}' (parameter '{}', shape {})", who_, k,
                     groups_[gi].params[i].name(), shape_str(data.shape()));
        ++used;
        return *it->second;
      };
      ParamState s;
      const Tensor& st = find("step");
      RELPOS_CHECK(st.dtype() == DType::I64 && st.dim() == 0,
                   "{}: load_state_dict: '{}' must be an int64 0-d tensor, got {}", who_, key(gi, i, "step"),
                   describe(st));
      RELPOS_CHECK(st.item() >= 0, "{}: load_state_dict: '{}' is negative ({})", who_, key(gi, i, "step"), st.item());
      s.step = int64_t(st.item());
      for (auto [field, member] : {std::pair{"exp_avg", &ParamState::exp_avg},
                                   std::pair{"exp_avg_sq", &ParamState::exp_avg_sq}}) {
        const Tensor& m = find(field);
        RELPOS_CHECK(m.shape() == data.shape(), "{}: load_state_dict: '{}' has shape {} in the state, {} in the parameter",
                     who_, key(gi, i, field), shape_str(m.shape()), shape_str(data.shape()));
        RELPOS_CHECK(m.dtype() == data.dtype(), "{}: load_state_dict: '{}' is {} in the state, the parameter is {}",
                     who_, key(gi, i, field), describe(m), describe(data));
        s.*member = m.device() == data.device() ? m.clone() : m.to(data.device());  // state follows the parameter
      }
      next[gi].push_back(std::move(s));
    }
  }
  if (used != given.size()) {
    for (const auto& [name, t] : state) {
      bool expected = false;
      for (size_t gi = 0; gi < groups_.size() && !expected; ++gi)
        for (size_t i = 0; i < groups_[gi].params.size() && !expected; ++i)
          for (const char* field : {"step", "exp_avg", "exp_avg_sq"}) expected = expected || key(gi, i, field) == name;
      RELPOS_CHECK(expected, "{}: load_state_dict: unexpected key '{}' ({})", who_, name, describe(t));
    }
  }
  state_ = std::move(next);
}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions opt) : AdamBase(std::move(groups), opt, false, "Adam") {}
Adam::Adam(std::vector<Variable> params, AdamOptions opt)
    : AdamBase(single_group(std::move(params), opt), opt, false, "Adam") {}
AdamW::AdamW(std::vector<ParamGroup> groups, AdamOptions opt) : AdamBase(std::move(groups), opt, true, "AdamW") {}
AdamW::AdamW(std::vector<Variable> params, AdamOptions opt)
    : AdamBase(single_group(std::move(params), opt), opt, true, "AdamW") {}

}  // namespace relpos::nn::optim
