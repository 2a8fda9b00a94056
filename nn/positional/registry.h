// nn/positional/registry.h — position encodings by name, so a config can pick one.
// Each encoding describes itself in its own file: `PositionVariant <name>_encoding()` gives its
// name, description, parameter schema, capabilities, facts and constructor. Adding one: that
// file, one X(<name>) line in RELPOS_POSITION_ENCODINGS below, and regenerated fixtures
// (docs/DESIGN.md, "Position encodings: one interface, many variants", the paragraph
// "Adding a variant"). Every test iterates position_variants().
#pragma once
#include <fmt/format.h>

#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "nn/positional/position_encoding.h"

namespace relpos::nn {

// What the rest of relpos needs to know about an encoding beyond its class: read by config
// validation, inspect, gradcheck and the CLI, so none of them compares the type name.
struct PositionFacts {
  // data.task that supplies the per-example position index (Batch::position_index); empty: none.
  std::string index_task;
  // Positions are rows of a [max_len, ...] table: a sequence longer than model.max_len cannot
  // be served (no extrapolation).
  bool bounded_by_max_len = false;
  // grid_h / grid_w parameters that must equal data.grid_h / grid_w on a patch_grid task.
  bool grid_params = false;
  // The bias is looked up by a patch-grid or graph index, not by a distance: there is no
  // bias-against-distance curve to show (inspect shows the table's gradient rows instead).
  bool index_bias = false;
  // score_terms at q = k = 0 are the position-only part of the scores (FIRE), shown by inspect;
  // false where the terms need the layer's projections (DeBERTa) or an index (graph_spd).
  bool probe_score_terms = true;
  // What inspect and `relpos bias` say where there is no fixed additive bias to show.
  std::string no_bias_note;
  // Token-scope channels the encoding reads from every batch (data.position_channels must list
  // them; config validation refuses a config that does not): cpe's {row, col}, ast's {parent}.
  // The gradchecks and inspect views pass demonstration values in these columns.
  std::vector<std::string> position_channels;
  // The encoding is a function of the distance kj - qi alone, through toeplitz_bias() and/or
  // distance_rows(): model.position.distance may name a position channel (an onset time) to
  // take the distance from (channel_distance_terms()). Config validation refuses a channel
  // distance on an encoding without this fact.
  bool distance_indexed = false;
  // Parameters for the gradchecks where the defaults do not fit their 5- and 6-token cases.
  std::map<std::string, std::string> gradcheck_params;
  // Checks of the position channels of a token file, run when a token dataset opens it (ast:
  // parents that form a tree, depths that agree with them): the file, its example starts
  // (n_examples + 1 offsets) and its token-scope channels by name. Errors name the file, the
  // example, the token and the channel. Empty: none.
  std::function<void(const std::string& file, const std::vector<uint64_t>& example_starts,
                     const std::map<std::string, std::vector<int32_t>>& token_channels)>
      check_channels;
};

// PositionFacts::no_bias_note of the rotary encodings (rope, xpos).
inline constexpr const char* kRotaryNote = "rotary encoding: rotates q and k, no additive bias";

struct PositionVariant {
  std::string name;
  std::string description;  // one line, for `relpos list`
  ParamSchema params;       // model.position.<key>: validation, defaults, `relpos list --params`, docs/config.md
  std::function<PositionEncodingPtr(const PositionConfig&, Generator&)> make;  // cfg.params bound to `params`
  bool causal_capable = true;  // false: encoder only (a decoder stack rejects it)
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
  PositionFacts facts{};

  const ParamSpec* param(const std::string& key) const;  // null when the encoding has no such parameter
};

// The registered encodings, in `relpos list` order: one line each. Each X(name) is defined in
// nn/positional/<name>.cpp as `PositionVariant name##_encoding()`.
#define RELPOS_POSITION_ENCODINGS(X)                                                                              \
  X(none)                                                                                                         \
  X(sinusoidal) X(learned) X(t5) X(alibi) X(rope) X(shaw) X(transformer_xl) X(kerple_log) X(kerple_power) X(fire) \
      X(sandwich) X(dynamic_bias) X(xpos) X(cope) X(relative_2d) X(graph_spd) X(deberta) X(music_transformer)    \
          X(cpe) X(ast)

#define RELPOS_DECLARE_POSITION_ENCODING(name) PositionVariant name##_encoding();
RELPOS_POSITION_ENCODINGS(RELPOS_DECLARE_POSITION_ENCODING)
#undef RELPOS_DECLARE_POSITION_ENCODING

const std::vector<PositionVariant>& position_variants();
const PositionVariant& find_position_variant(const std::string& name);  // error lists the names

// An encoding of the registry, resolved from its name once (when a config or ModelConfig is
// made): what relpos asks of it later (facts, capabilities, parameters) is a member access
// (`cfg.position->facts`), never another lookup by name. Made from a name (a ConfigError listing
// the registered names when there is none such), and usable as that name (messages, YAML, JSON).
class PositionType {
 public:
  PositionType() : PositionType("none") {}
  PositionType(const std::string& name) : v_(&find_position_variant(name)) {}  // implicit: cfg.position = "t5"
  PositionType(const char* name) : PositionType(std::string(name)) {}
  const PositionVariant& variant() const { return *v_; }
  const PositionVariant* operator->() const { return v_; }
  const std::string& name() const { return v_->name; }
  operator const std::string&() const { return v_->name; }
  bool operator==(const PositionType& o) const { return v_ == o.v_; }

 private:
  const PositionVariant* v_;
};
inline std::ostream& operator<<(std::ostream& o, const PositionType& t) { return o << t.name(); }
// Binds cfg.params to the variant's schema (unknown keys, types and bounds are refused here)
// and builds it.
PositionEncodingPtr make_position_encoding(const PositionConfig& cfg, Generator& gen);
// The encodings whose facts say distance_indexed (model.position.distance may name a channel).
std::vector<std::string> distance_indexed_names();
// The Markdown table docs/config.md embeds between its "relpos list --params --markdown" markers.
std::string position_params_markdown();

// The number of learnable parameters make_position_encoding(cfg) has, without building it at
// cfg's sizes: every encoding's count is a polynomial of degree <= 2 in n_heads and in
// head_dim and <= 1 in max_len (Transformer-XL's W_r: (n_heads head_dim)^2, a learned table:
// max_len n_heads head_dim), read from builds at small sizes with the same residues mod 4
// (Newton's forward differences, exact). tests/nn/test_position_count.cpp checks it against real
// builds of every registered encoding. nullopt: the count overflows int64.
std::optional<int64_t> position_parameter_count(const PositionConfig& cfg);
// An instance for the checks and facts that do not depend on the sizes (config validation:
// which biases exist, causal-only, absolute; the memory estimate: Shaw's buckets). Built at
// cfg's sizes with max_len <= 64, so that size checks run (rope: a fraction of head_dim that
// leaves no rotary pair), unless its parameters would then exceed 2^22 elements: then at the
// smallest sizes of the same parity (n_heads and head_dim 1 or 2), whose checks are the same
// for every encoding with such tables (Transformer-XL's [d_model, d_model] W_r would be 17 GB
// at d_model 65,536; its one size check is an even d_model).
PositionEncodingPtr make_position_probe(const PositionConfig& cfg, Generator& gen);

}  // namespace relpos::nn

template <>
struct fmt::formatter<relpos::nn::PositionType> : fmt::formatter<std::string_view> {
  auto format(const relpos::nn::PositionType& t, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(t.name(), ctx);
  }
};
