// nn/positional/position_encoding.h — the one interface every position encoding implements.
// Attention computes, per head h, query i and key j at absolute positions
// qi = q_offset + i, kj = k_offset + j:
//
//   S[h,i,j] = scale * (<rot(q_i), rot_k(k_j)> + score_term[h,i,j])    rotate(), rotate_key(), score_terms()
//            + alpha_h * bias[h, kj - qi]                                 toeplitz_bias()
//            + alpha_h * bias[(b,) h, i, j]                               score_bias() / index_bias()
//   mask -> softmax -> dropout -> P
//   O_i = sum_j P_ij v_j + value_term_i                                   value_terms()
//
// A variant overrides only the hooks it needs; absolute encodings override embed().
// Positions are explicit, so cross-attention (Lq != Lk) and KV-cache decoding are exact.
//
// score_bias() is the hook for additive biases that are NOT a function of kj - qi alone
// (Swin 2D patch offsets, graph shortest-path distances): a materialised [H, Lq, Lk] or
// per-example [B, H, Lq, Lk] bias, added exactly where the Toeplitz bias is (after the
// scaling, times alpha when the bias scale is enabled, before the masks). Prefer
// toeplitz_bias() whenever the bias depends on the distance only: it never builds [H, Lq, Lk].
// When the score bias is a table lookup, index_bias() gives the table and the index instead,
// and the fused kernel gathers it tile by tile (no [H, Lq, Lk] either).
// AttnGeometry::q_proj / k_proj expose the layer's own content projections, for encodings
// that project position embeddings with the attention weights (DeBERTa share_att_key).
#pragma once
#include <cmath>
#include <functional>
#include <memory>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "nn/module.h"
#include "nn/positional/params.h"

namespace relpos::nn {

struct AttnGeometry {
  int64_t Lq = 0, Lk = 0;
  int64_t q_offset = 0, k_offset = 0;  // absolute position of query row 0 / key column 0
  bool causal = false;                  // decoder self-attention (else bidirectional)
  // Optional per-example structure for index-based encodings (2D patch grids, graphs):
  // int64 [B, Lq, Lk] or [Lq, Lk], e.g. shortest-path distances. Undefined otherwise.
  Tensor position_index;
  // Per-token position channels from the data (data.position_channels): int64 [B, L, P], column p
  // = PositionConfig::channels[p]; query row i is token q_offset + i of it, key column j token
  // k_offset + j (self-attention without a memory or cache: q_offset = k_offset = 0, L = Lq = Lk).
  // Undefined when the input carries none (no channels configured, or decoding, whose generated
  // tokens have no data): an encoding that reads a channel refuses then, naming it.
  Tensor positions;
  // With positions: the keys' padding [B, Lk] (1 = padding; the same tokens), or undefined.
  Tensor key_padding;
  // The attention layer's query / key projections x [.., D] -> [.., D] (weights and bias), set
  // by MultiHeadAttention; empty when the geometry is built elsewhere (inspection).
  std::function<Variable(const Variable&)> q_proj, k_proj;
};

// What a variant is built from (model sizes + its own parameters).
struct PositionConfig {
  std::string type = "none";
  int64_t d_model = 0, n_heads = 0, head_dim = 0;
  int64_t max_len = 0;      // longest sequence the model is built for (learned tables)
  double init_std = 0.02;   // std of every learnable position table
  PositionParams params;
  // Names of the per-token position channels the input carries (AttnGeometry::positions columns,
  // model.position_channels = data.position_channels); an encoding that reads one finds its column
  // with channel_column().
  std::vector<std::string> channels;
  DType dtype = DType::F32;
  // Set by a stack that shares one instance across its layers. An encoding whose parameters
  // are partly shared and partly per layer (Transformer-XL: u, v shared, W_r per layer) then
  // builds only the shared part and hands each layer its own part through make_layer().
  bool shared_across_layers = false;
  // model.position.distance: "index" (kj - qi of the token positions) or a channel of `channels`
  // whose values give the distance instead, kj - qi = c[k_offset + j] - c[q_offset + i] (an onset
  // time). Only encodings whose declaration says PositionFacts::distance_indexed take a channel.
  std::string distance = "index";
};

// What the stack-level hooks (embed_input, after_block) see of a batch.
struct StackInput {
  Tensor positions;    // int64 [B, L, P]: columns PositionConfig::channels (data.position_channels); or undefined
  Tensor padding;      // [B, L], 1 = padding; or undefined
  int64_t offset = 0;  // absolute position of token 0
};

class PositionEncoding : public Module {
 public:
  virtual std::string type() const = 0;
  // Works only with a causal mask (e.g. forms that rely on future keys being masked).
  virtual bool causal_only() const { return false; }
  // Absolute encodings act once on the input (embed()); a stack never makes per-layer copies.
  virtual bool is_absolute() const { return false; }
  // The factor s in S = s * (q.k + score terms): 1/sqrt(head_dim) by default; T5 uses 1,
  // DeBERTa 1/sqrt(head_dim * (1 + number of position terms)).
  virtual double score_scale(int64_t head_dim) const { return 1.0 / std::sqrt(double(head_dim)); }

  // Absolute encodings: x [B, L, D] at positions offset.. -> x + PE.
  virtual Variable embed(const Variable& x, int64_t /*offset*/) const { return x; }
  // The stack's call of embed(): x [B, L, D] with the batch's positions and padding (encodings
  // that read position channels: learned with grid_h/grid_w). Default: embed(x, in.offset).
  virtual Variable embed_input(const Variable& x, const StackInput& in) const { return embed(x, in.offset); }
  // Stack-level hook after block `block` (0-based) of a stack: hidden states x [B, L, D] ->
  // x plus what the encoding adds (cpe: the PEG convolution after block 0). Default: x.
  virtual Variable after_block(const Variable& x, int64_t /*block*/, const StackInput& /*in*/) const { return x; }
  // Rotary encodings: x [B, H, L, dh] at positions offset.. -> rotated x (applied to q and k).
  virtual Variable rotate(const Variable& x, int64_t /*offset*/) const { return x; }
  // The key side of rotate(); the same map unless q and k are treated differently (xPos
  // scales q by zeta^(m/s) and k by zeta^(-n/s)).
  virtual Variable rotate_key(const Variable& x, int64_t offset) const { return rotate(x, offset); }
  // Content-position score terms: q [B, H, Lq, dh], k [B, H, Lk, dh] -> [B, H, Lq, Lk]
  // (undefined = none). Added before the 1/sqrt(d) scaling.
  virtual Variable score_terms(const Variable&, const Variable&, const AttnGeometry&) const { return {}; }
  // Distance-only additive bias in Toeplitz form: [H, Lq + Lk - 1], entry t is the bias for
  // kj - qi = (k_offset - q_offset) + t - (Lq - 1) (undefined = none). Added after scaling.
  virtual Variable toeplitz_bias(const AttnGeometry&) const { return {}; }
  // Non-Toeplitz additive bias: [H, Lq, Lk] or [B, H, Lq, Lk] (undefined = none). Added after
  // scaling, times alpha if enabled, together with the Toeplitz bias, before the masks. The
  // default materialises index_bias (when defined) for the reference path.
  virtual Variable score_bias(const AttnGeometry& g) const;
  // A score bias that is a table lookup, for the fused kernel (k::AttentionIndexBias):
  //   score_bias[(b,) h, i, j] = table[index[(b,) i, j], h]
  // table [NT, H] (the learnable parameter; the layer multiplies it by alpha), index int64
  // [Lq, Lk] or [B, Lq, Lk] with values in [0, NT) (relative_2d, graph_spd). The attention
  // layer passes it to the fused kernel, or takes score_bias on the reference path.
  struct IndexBias {
    Variable table;  // [NT, H]
    Tensor index;    // int64 [Lq, Lk] or [B, Lq, Lk]
  };
  virtual IndexBias index_bias(const AttnGeometry&) const { return {}; }
  // Value terms: p [B, H, Lq, Lk] -> [B, H, Lq, dh] added to P @ V (undefined = none).
  virtual Variable value_terms(const Variable&, const AttnGeometry&) const { return {}; }
  virtual bool has_value_terms() const { return false; }  // true when value_terms is defined
  // The same content terms in bucketed form, for the fused kernel (O(L k) memory, no
  // [B, H, Lq, Lk]): score term q_i . keys[n] (before scaling) and value term
  // sum_j P_ij values[n], n = bucket[j - i + Lq - 1] (Toeplitz-indexed, int64 [Lq + Lk - 1]).
  // Defined only by encodings whose score_terms/value_terms are exactly this (Shaw); the
  // attention layer then skips score_terms/value_terms when it takes the fused path.
  struct Buckets {
    Variable keys, values;  // [NB, dh] each (values undefined: no value term)
    Tensor bucket;          // int64 [Lq + Lk - 1]
  };
  virtual Buckets bucketed_terms(const AttnGeometry&) const { return {}; }
  // For inspection (`relpos inspect`): an index bias drawn over two relation coordinates (ast:
  // the up and down steps between two tokens' nodes), bias [H, R, C] before alpha, with the
  // axes' names; undefined bias: the encoding has none.
  struct BiasGrid {
    std::string row_axis, col_axis, note;
    Tensor bias;
  };
  virtual BiasGrid bias_grid() const { return {}; }
  // The content terms of a distance-indexed encoding as table rows, for any distances (the
  // channel-distance path, channel_distance_terms()): keys [NB, dh] or per head [H, NB, dh],
  // values [NB, dh] (or undefined: no value term) and the row of each Toeplitz distance of g.
  // Default: bucketed_terms(); Music Transformer gives its per-head table.
  virtual Buckets distance_rows(const AttnGeometry& g) const { return bucketed_terms(g); }
  // Where kj - qi comes from (model.position.distance): -1, the token positions; c >= 0, column
  // c of AttnGeometry::positions. Set by make_position_encoding; the attention layer then takes
  // the encoding's terms through channel_distance_terms() instead of the Toeplitz hooks.
  int64_t distance_column() const { return distance_column_; }
  void set_distance_column(int64_t column) { distance_column_ = column; }
  // For inspection (`relpos bias`): the lookup index [Lq, Lk] of table-based variants
  // (index-driven ones such as graph_spd: shaped like position_index, undefined without it).
  virtual Tensor bias_index(const AttnGeometry&) const { return {}; }
  // Per-layer part of an instance built with shared_across_layers: the encoding one layer
  // uses (registered at layers.N.attn.pos), holding that layer's own parameters and this
  // instance's shared ones (registered only here). nullptr (default): layers use this instance.
  virtual std::shared_ptr<PositionEncoding> make_layer(Generator&) const { return nullptr; }
  // Evaluation-time change of a fixed (non-learned) setting without retraining, e.g. RoPE
  // context scaling (scaling=linear|ntk|yarn, factor=...). Keys already in a KV cache keep
  // what they were computed with. The default throws "not supported by <type>".
  virtual void set_eval_scaling(const PositionParams& params);

 protected:
  // A tensor that depends only on the geometry (a bucket index, a distance row, a rotary
  // table) and on constants of this encoding: `build` runs on the host the first time a
  // (tag, Lq, Lk, q_offset, k_offset, causal) is seen, its result is moved to this module's
  // device and kept, so later forwards of the same geometry cost a map lookup and no host
  // loop or transfer. Bounded (cleared when it holds 256 entries); dropped by to() and by
  // changes of the encoding's constants (clear_geometry_cache()).
  Tensor geometry_cached(const char* tag, const AttnGeometry& g, const std::function<Tensor()>& build) const;
  // Same, keyed by the caller's integers (e.g. a length and an offset for rotary tables).
  Tensor cached(const char* tag, std::initializer_list<int64_t> key, const std::function<Tensor()>& build) const;
  void clear_geometry_cache() const { cache_.clear(); }
  void on_device_change() override { clear_geometry_cache(); }

 private:
  mutable std::map<std::pair<std::string, std::vector<int64_t>>, Tensor> cache_;
  int64_t distance_column_ = -1;
};

using PositionEncodingPtr = std::shared_ptr<PositionEncoding>;

// The column of position channel `name` in AttnGeometry::positions; a ConfigError naming the
// encoding, the channel and data.position_channels' names when the data does not carry it.
int64_t channel_column(const PositionConfig& cfg, const std::string& name);

// Distances kj - qi for the Toeplitz entries t = 0 .. Lq + Lk - 2 (int64 [Lq + Lk - 1]).
Tensor toeplitz_distances(const AttnGeometry& g);

// Distances read from a position channel: d[b, i, j] = c[b, k_offset + j] - c[b, q_offset + i],
// c = column `column` of g.positions (int64 [B, Lq, Lk], on the host). The error names the
// channel column and the geometry when g.positions does not cover the rows.
Tensor channel_distances(const AttnGeometry& g, int64_t column);

// The terms of a distance-indexed encoding with its distances from a channel, for every (i, j)
// of every example. The encoding's own hooks are evaluated once over the range of distances
// present, dmin .. dmax (a geometry with one query at 0 and keys at dmin .. dmax, whose
// Toeplitz distances are that range), and each (b, i, j) looks its distance up:
//   bias: table [R, H] = toeplitz_bias(range)^T, index [B, Lq, Lk] = d - dmin (the IndexBias
//         form: the fused kernel gathers it, the reference path materialises it);
//   rows: content terms, keys / values from distance_rows(range), rows[b, i, j] = its row of d.
struct ChannelDistanceTerms {
  PositionEncoding::IndexBias bias;  // undefined table: no additive bias
  Variable keys, values;             // distance_rows(): [NB, dh] or [H, NB, dh]; undefined: none
  Tensor rows;                       // int64 [B, Lq, Lk]
};
ChannelDistanceTerms channel_distance_terms(const PositionEncoding& pos, const AttnGeometry& g);

}  // namespace relpos::nn
