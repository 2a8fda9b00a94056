// nn/positional/registry.h — position encodings by name, so a config can pick one.
// Adding a variant: one file in nn/positional/, one line in registry.cpp, one test file.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "relpos/core/rng.h"
#include "relpos/nn/positional/position_encoding.h"

namespace relpos::nn {

struct PositionVariant {
  std::string name;
  std::string description;  // one line, for `relpos list`
  bool causal_capable = true;
  std::function<PositionEncodingPtr(const PositionConfig&, Generator&)> make;
  bool per_layer = false;  // default of model.position_shared: one instance per layer (else per stack)
};

const std::vector<PositionVariant>& position_variants();
const PositionVariant& find_position_variant(const std::string& name);  // error lists the names
PositionEncodingPtr make_position_encoding(const PositionConfig& cfg, Generator& gen);

}  // namespace relpos::nn
