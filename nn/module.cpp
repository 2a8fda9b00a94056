#include "nn/module.h"

namespace relpos::nn {

Variable& Module::register_parameter(const std::string& name, Tensor init) {
  for (auto& [n, v] : params_) RELPOS_CHECK(n != name, "register_parameter: '{}' registered twice", name);
  params_.emplace_back(name, Variable(std::move(init), true).set_name(name));
  return params_.back().second;
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Variable>>& out) const {
  for (const auto& [n, v] : params_) out.emplace_back(prefix + n, v);
  for (const auto& [n, m] : children_) m->collect(prefix + n + ".", out);
}

std::vector<std::pair<std::string, Variable>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Variable>> out;
  collect("", out);
  return out;
}

std::vector<Variable> Module::parameters() const {
  std::vector<Variable> out;
  for (auto& [n, v] : named_parameters()) out.push_back(v);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, m] : children_) m->train(on);
}

void Module::zero_grad() const {
  for (const Variable& p : parameters()) p.zero_grad();
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Variable& p : parameters()) n += p.numel();
  return n;
}

}  // namespace relpos::nn
