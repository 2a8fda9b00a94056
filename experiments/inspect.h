// experiments/inspect.h — what `relpos list`, `relpos bias` and `relpos gradcheck` compute:
// the additive bias a freshly built position encoding adds, and float64 gradchecks of a
// small attention layer with each encoding (inputs, tables, slopes and bias scale alpha).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "nn/positional/registry.h"

namespace relpos::inspect {

struct BiasRequest {
  nn::PositionType type;
  int64_t heads = 4, lq = 8, lk = 8, q_offset = 0, k_offset = 0;
  bool causal = false;
  std::map<std::string, std::string> params;
  bool identity_table = false;  // fill lookup tables with their row index (shows buckets)
  uint64_t seed = 0;
  // The onsets of Lq = Lk tokens (offsets 0): the bias against their time distances
  // kj - qi = times[j] - times[i] (model.position.distance: time). Empty: token distances.
  std::vector<int64_t> times;
};

struct BiasReport {
  std::vector<double> bias;     // [H][Lq][Lk] row-major, empty when the encoding adds none
  std::vector<int64_t> index;   // [Lq][Lk], empty when it uses no lookup table
  std::string note;             // what the encoding does instead, when it has no additive bias
};

BiasReport position_bias(const BiasRequest& req);

struct GradcheckCase {
  std::string label;
  GradcheckReport report;
};

// The encoding of the gradchecks: 2 heads of 4 dims (d_model 8), tables at std 0.5 (large
// enough that they matter in the check), float64, max_len positions; the channels it reads
// (cpe: row, col; ast: parent), or a `time` channel for the distance (by_time).
nn::PositionConfig gradcheck_config(const nn::PositionType& type, const std::map<std::string, std::string>& params,
                                    bool by_time = false, int64_t max_len = 16);

// Gradchecks for one variant (or every registered one when type == "all"): causal and
// bidirectional self-attention and cross-attention with offsets and padding. Causal-only
// variants have no bidirectional case (their cross geometry runs with the causal mask);
// encoder-only variants skip the causal case; relative_2d (grid 3x4) and deberta (4
// buckets, max 8) get small default parameters that --param overrides; graph_spd runs on a
// built-in graph. Encodings the fused kernel serves (PositionVariant::fused_attention) run
// every case twice, labelled [fused] and [reference]; the others [reference].
std::vector<GradcheckCase> attention_gradchecks(const std::string& type,
                                                const std::map<std::string, std::string>& params = {});

}  // namespace relpos::inspect
