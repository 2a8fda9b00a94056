// nn/optim/sgd.h — SGD with momentum and (coupled) weight decay, PyTorch semantics:
//   g = grad + wd * p;  buf = momentum * buf + g  (buf = g on the first step);  p -= lr * buf
#pragma once
#include <vector>

#include "autograd/variable.h"

namespace relpos::nn::optim {

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double weight_decay = 0.0;
};

class SGD {
 public:
  SGD(std::vector<Variable> params, SGDOptions opt);
  void step();       // parameters without a grad are skipped
  void zero_grad();  // drops every parameter's grad
  SGDOptions& options() { return opt_; }
  void set_lr(double lr) { opt_.lr = lr; }
  // Momentum buffers by parameter index ("<i>.momentum_buffer"), for checkpoints.
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);

 private:
  std::vector<Variable> params_;
  std::vector<Tensor> momentum_;
  SGDOptions opt_;
};

}  // namespace relpos::nn::optim
