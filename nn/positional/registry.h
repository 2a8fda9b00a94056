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
  // Declared capability: the scores are q k^T (after rotate/rotate_key) plus at most a
  // Toeplitz bias, bucketed content terms (Shaw: PositionEncoding::bucketed_terms) and a
  // table-lookup bias (relative_2d, graph_spd: PositionEncoding::index_bias) — no other score
  // terms, materialised score bias or value terms — so `model.attention: fused` runs the
  // fused kernel (k::attention) for it. The others (Transformer-XL, DeBERTa, CoPE: dense
  // content-position terms; FIRE: bias normalised by the query position) take the
  // materialised path. Tested against the path each encoding's layers actually take
  // (tests/nn/test_model_trajectory.cpp); the memory estimate reads it.
  bool fused_attention = false;
};

const std::vector<PositionVariant>& position_variants();
const PositionVariant& find_position_variant(const std::string& name);  // error lists the names
PositionEncodingPtr make_position_encoding(const PositionConfig& cfg, Generator& gen);

}  // namespace relpos::nn
