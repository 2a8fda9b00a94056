#include "nn/module.h"

#include <algorithm>
#include <unordered_set>

namespace relpos::nn {

Variable& Module::register_parameter(const std::string& name, Tensor init, const std::string& group) {
  for (auto& p : params_) RELPOS_CHECK(p.name != name, "register_parameter: '{}' registered twice", name);
  params_.push_back({name, Variable(std::move(init), true).set_name(name), group});
  return params_.back().param;
}

Variable& Module::register_buffer(const std::string& name, Tensor init) {
  for (auto& [n, b] : buffers_) RELPOS_CHECK(n != name, "register_buffer: '{}' registered twice", name);
  buffers_.emplace_back(name, Variable(std::move(init), false));
  return buffers_.back().second;
}

void Module::to(Device device) {
  std::vector<const Module*> seen;
  move_to(device, seen);
}

void Module::move_to(Device device, std::vector<const Module*>& seen) {
  if (std::find(seen.begin(), seen.end(), this) != seen.end()) return;
  seen.push_back(this);
  for (auto& p : params_)
    if (p.param.data().device() != device) p.param.set_data(p.param.data().to(device));
  for (auto& [n, b] : buffers_)
    if (b.data().device() != device) b.set_data(b.data().to(device));
  device_ = device;
  for (auto& [n, m] : children_) m->move_to(device, seen);
  on_device_change();
}

void Module::collect(const std::string& prefix, std::vector<NamedParameter>& out, std::vector<const Module*>& seen,
                     std::vector<std::pair<std::string, Variable>>* buffers) const {
  if (std::find(seen.begin(), seen.end(), this) != seen.end()) return;
  seen.push_back(this);
  for (const auto& p : params_) out.push_back({prefix + p.name, p.param, p.group});
  if (buffers)
    for (const auto& [n, b] : buffers_) buffers->emplace_back(prefix + n, b);
  for (const auto& [n, m] : children_) m->collect(prefix + n + ".", out, seen, buffers);
}

std::vector<std::pair<std::string, Variable>> Module::named_buffers() const {
  std::vector<NamedParameter> params;
  std::vector<const Module*> seen;
  std::vector<std::pair<std::string, Variable>> out;
  collect("", params, seen, &out);
  return out;
}

std::vector<NamedParameter> Module::named_parameters_with_groups() const {
  std::vector<NamedParameter> out;
  std::vector<const Module*> seen;
  collect("", out, seen);
  return out;
}

std::vector<std::pair<std::string, Variable>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Variable>> out;
  for (auto& p : named_parameters_with_groups()) out.emplace_back(p.name, p.param);
  return out;
}

std::vector<Variable> Module::parameters() const {
  std::vector<Variable> out;
  for (auto& p : named_parameters_with_groups()) out.push_back(p.param);
  return out;
}

std::vector<Variable> Module::parameters_in_group(const std::string& group) const {
  std::vector<Variable> out;
  for (auto& p : named_parameters_with_groups())
    if (p.group == group) out.push_back(p.param);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& p : named_parameters_with_groups()) out.emplace_back(p.name, p.param.data());
  return out;
}

void Module::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  auto params = named_parameters_with_groups();
  std::unordered_set<std::string> given;
  for (const auto& [name, t] : state) {
    auto it = std::find_if(params.begin(), params.end(), [&key = name](const NamedParameter& p) { return p.name == key; });
    RELPOS_CHECK(it != params.end(), "load_state_dict: unexpected key '{}'", name);
    RELPOS_CHECK(it->param.shape() == t.shape(), "load_state_dict: '{}' has shape {} in the state, {} in the model",
                 name, shape_str(t.shape()), shape_str(it->param.shape()));
    given.insert(name);
  }
  for (const auto& p : params)
    RELPOS_CHECK(given.count(p.name), "load_state_dict: missing key '{}' (shape {})", p.name, shape_str(p.param.shape()));
  for (const auto& [name, t] : state)
    for (auto& p : params)
      if (p.name == name) p.param.data().copy_(t);
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
