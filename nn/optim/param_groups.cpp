#include "nn/optim/param_groups.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

namespace relpos::nn::optim {

std::vector<std::string> default_no_decay_groups() { return {group::kNormsAndBiases, group::kPosition}; }

std::vector<ParamGroup> param_groups_by_tag(const Module& m, double weight_decay,
                                            const std::vector<std::string>& no_decay) {
  RELPOS_CHECK(std::isfinite(weight_decay) && weight_decay >= 0,
               "param_groups_by_tag: weight_decay must be finite and >= 0, got {}", weight_decay);
  for (const auto& n : no_decay)
    RELPOS_CHECK(!n.empty(), "param_groups_by_tag: empty group name in the no-decay list");
  std::vector<ParamGroup> groups;
  std::unordered_map<std::string, size_t> index;
  for (const NamedParameter& p : m.named_parameters_with_groups()) {
    auto [it, inserted] = index.try_emplace(p.group, groups.size());
    if (inserted) {
      const bool excluded = std::find(no_decay.begin(), no_decay.end(), p.group) != no_decay.end();
      groups.push_back(ParamGroup{{}, excluded ? 0.0 : weight_decay, 1.0, p.group});
    }
    groups[it->second].params.push_back(p.param);
  }
  return groups;
}

void validate_param_groups(const std::vector<ParamGroup>& groups, const char* who) {
  std::unordered_set<std::string> names;
  std::unordered_map<const void*, std::string> seen;  // first element's address -> where
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const ParamGroup& g = groups[gi];
    RELPOS_CHECK(!g.name.empty(), "{}: parameter group {} has no name", who, gi);
    RELPOS_CHECK(names.insert(g.name).second, "{}: two parameter groups are named '{}'", who, g.name);
    RELPOS_CHECK(std::isfinite(g.weight_decay) && g.weight_decay >= 0,
                 "{}: group '{}': weight_decay must be finite and >= 0, got {}", who, g.name, g.weight_decay);
    RELPOS_CHECK(std::isfinite(g.lr_scale) && g.lr_scale >= 0,
                 "{}: group '{}': lr_scale must be finite and >= 0, got {}", who, g.name, g.lr_scale);
    for (size_t i = 0; i < g.params.size(); ++i) {
      const Variable& p = g.params[i];
      RELPOS_CHECK(p.defined(), "{}: group '{}' parameter {} is undefined", who, g.name, i);
      RELPOS_CHECK(is_floating(p.dtype()), "{}: group '{}' parameter {} ('{}') has dtype {}, expected a floating dtype",
                   who, g.name, i, p.name(), dtype_name(p.dtype()));
      if (p.numel() == 0) continue;  // nothing to alias
      const void* key = p.data().raw_data();  // two Variables on one buffer are one parameter
      auto [it, inserted] = seen.try_emplace(key, fmt::format("group '{}' parameter {}", g.name, i));
      RELPOS_CHECK(inserted, "{}: group '{}' parameter {} ('{}') is the same parameter as {}", who, g.name, i,
                   p.name(), it->second);
    }
  }
}

}  // namespace relpos::nn::optim
