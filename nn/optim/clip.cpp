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

double sum_of_squares(const Tensor& grad) {
  Tensor g = grad.device() == Device::CPU ? grad.contiguous() : grad.to(Device::CPU).contiguous();
  return visit_float(g.dtype(), "grad_norm", [&]<typename T>() {
    const T* x = g.data<T>();
    double acc = 0.0;
    for (int64_t i = 0, n = g.numel(); i < n; ++i) acc += double(x[i]) * double(x[i]);
    return acc;
  });
}

double norm_of(const std::vector<Variable>& params) {
  double acc = 0.0;
  for (const Variable& p : params) acc += sum_of_squares(p.grad());
  return std::sqrt(acc);
}

}  // namespace

double grad_norm(const std::vector<Variable>& params) { return norm_of(with_grad_once(params)); }

double clip_grad_norm(const std::vector<Variable>& params, double max_norm) {
  RELPOS_CHECK(max_norm > 0, "clip_grad_norm: max_norm must be > 0, got {}", max_norm);
  const std::vector<Variable> ps = with_grad_once(params);
  const double total = norm_of(ps);
  if (!std::isfinite(total)) return total;
  const double coef = max_norm / (total + 1e-6);
  if (coef >= 1.0) return total;
  NoGradGuard no_grad;
  for (const Variable& p : ps) k::mul_(p.grad(), coef);  // each leaf owns its grad (AccumulateGrad)
  return total;
}

}  // namespace relpos::nn::optim
