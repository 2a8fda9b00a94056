// nn/positional/param_docs.h — the parameters of every position encoding (model.position.<key>),
// with type, default and meaning: `relpos list --params` prints them and docs/config.md's
// per-encoding table is generated from them (tests/nn/test_param_docs.cpp keeps the two and
// each variant's accepted keys in sync).
#pragma once
#include <string>
#include <vector>

namespace relpos::nn {

struct PositionParamDoc {
  std::string name;
  std::string type;          // "int", "float", "bool" or "a | b | c"
  std::string default_value;
  std::string meaning;
};

// The documented parameters of a registered variant (empty for 'none'); throws for an unknown name.
const std::vector<PositionParamDoc>& position_param_docs(const std::string& variant);

// The Markdown table docs/config.md embeds between its "relpos list --params --markdown" markers.
std::string position_params_markdown();

}  // namespace relpos::nn
