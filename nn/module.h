// nn/module.h — Module: named parameters and submodules with stable dotted names
// ("layers.0.fc.weight"), train/eval mode, zero_grad. Registration order is the
// iteration order, so state_dict-style listings are deterministic.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace relpos::nn {

class Module {
 public:
  virtual ~Module() = default;

  std::vector<std::pair<std::string, Variable>> named_parameters() const;
  std::vector<Variable> parameters() const;
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad() const;
  int64_t num_parameters() const;

 protected:
  Variable& register_parameter(const std::string& name, Tensor init);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Variable>>& out) const;
  std::vector<std::pair<std::string, Variable>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace relpos::nn
