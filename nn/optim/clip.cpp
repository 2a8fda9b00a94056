#include "nn/optim/clip.h"

#include <cmath>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "kernels/ops.h"

namespace relpos::nn::optim {

namespace {

// The parameters that have a grad, each once (identified by the address of its grad slot,
// which is unique per VariableImpl).
std::vector<Variable> with_grad_once(const std::vector<Variable>& params) {
  std::vector<Variable> out;
  std::unordered_set<const Tensor*> seen;
  for (const Variable& p : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    if (seen.insert(&p.grad()).second) out.push_back(p);
  }
  return out;
}

// sum over parameters of sum(g^2): the per-parameter sums (float64, on the grads' device) are
// added on the device in parameter order; nothing is read back. Non-finite when any gradient
// element is NaN/Inf.
Tensor sq_sum_of(const std::vector<Variable>& params) {
  Tensor acc;
  for (const Variable& p : params) {
    Tensor s = k::sum_squares(p.grad());
    if (!acc.defined()) acc = s;
    else if (s.device() == acc.device()) acc = k::add(acc, s);
    else acc = k::add(acc, s.to(acc.device()));  // parameters on two devices: rare, still exact
  }
  return acc;
}

}  // namespace

Tensor grad_sq_sum(const std::vector<Variable>& params) {
  return sq_sum_of(with_grad_once(params));
}

double grad_norm(const std::vector<Variable>& params) {
  const Tensor acc = grad_sq_sum(params);
  return acc.defined() ? std::sqrt(acc.item()) : 0.0;
}

double clip_grad_norm(const std::vector<Variable>& params, double max_norm) {
  return clip_grad_norm(params, max_norm, grad_norm(params));
}

double clip_grad_norm(const std::vector<Variable>& params, double max_norm, double total) {
  RELPOS_CHECK(max_norm > 0, "clip_grad_norm: max_norm must be > 0, got {}", max_norm);
  if (!std::isfinite(total)) return total;
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) scale_grads(params, coef);
  return total;
}

void scale_grads(const std::vector<Variable>& params, double s) {
  NoGradGuard no_grad;
  for (const Variable& p : with_grad_once(params)) k::mul_(p.grad(), s);  // each leaf owns its grad (AccumulateGrad)
}

}  // namespace relpos::nn::optim
