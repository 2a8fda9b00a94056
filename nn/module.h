// nn/module.h — Module: named parameters and submodules with stable dotted names
// ("layers.0.attn.q_proj.weight"), parameter groups, train/eval mode, state_dict /
// load_state_dict. Registration order is the iteration order, so listings are
// deterministic. A submodule registered twice (a shared table) is listed once, under the
// name of its first registration.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace relpos::nn {

// Parameter groups that optimizers (weight-decay exclusions) and monitors address.
namespace group {
inline constexpr const char* kWeights = "weights";              // matrices of linear layers, embeddings
inline constexpr const char* kNormsAndBiases = "norms_biases";  // LayerNorm/RMSNorm gains, linear biases
inline constexpr const char* kPosition = "position";            // position tables, slopes, bias scales
}  // namespace group

struct NamedParameter {
  std::string name;
  Variable param;
  std::string group;
};

class Module {
 public:
  virtual ~Module() = default;

  std::vector<std::pair<std::string, Variable>> named_parameters() const;
  std::vector<NamedParameter> named_parameters_with_groups() const;
  std::vector<Variable> parameters() const;
  std::vector<Variable> parameters_in_group(const std::string& group) const;
  // The registered buffers (register_buffer) of this module and its submodules, with dotted
  // names like named_parameters(): what to() moves besides the parameters.
  std::vector<std::pair<std::string, Variable>> named_buffers() const;
  // name -> tensor (shares storage with the parameters)
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  // Copies values in; every name must exist with the same shape and every parameter must be
  // given (errors name the key and both shapes).
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);
  // Move every parameter and buffer of this module and its submodules to `device` (a no-op
  // for those already there). Variables keep their identity, so an optimizer built before
  // the move keeps working; gradients are dropped. Optimizer state follows its parameters
  // (it is allocated, and loaded, on the parameter's device).
  void to(Device device);
  Device device() const { return device_; }
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad() const;
  int64_t num_parameters() const;

 protected:
  Variable& register_parameter(const std::string& name, Tensor init,
                               const std::string& group = group::kWeights);
  // A tensor the module needs that is not learned (constant tables, slopes): moved by to(),
  // not part of state_dict.
  Variable& register_buffer(const std::string& name, Tensor init);
  // Called after to() moved this module's tensors (drop caches built for the old device).
  virtual void on_device_change() {}
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }

 private:
  void collect(const std::string& prefix, std::vector<NamedParameter>& out, std::vector<const Module*>& seen,
               std::vector<std::pair<std::string, Variable>>* buffers = nullptr) const;
  void move_to(Device device, std::vector<const Module*>& seen);
  std::vector<NamedParameter> params_;
  std::vector<std::pair<std::string, Variable>> buffers_;
  Device device_ = Device::CPU;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace relpos::nn
