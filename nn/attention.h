// nn/attention.h — multi-head attention with a pluggable position encoding.
//   xq: [B, Lq, D], xkv: [B, Lk, D] (self-attention: the same tensor)
//   q, k, v = proj(x) -> [B, H, L, dh];  q, k = pos.rotate(q, q_offset), pos.rotate_key(k, k_offset)
//   S = s * (q k^T + pos.score_terms(q, k))      s = 1/sqrt(dh) unless the encoding says not
//   S = S + alpha * pos.toeplitz_bias()          Toeplitz form, no [H, Lq, Lk] bias tensor
//   S = S + alpha * pos.score_bias()             index-based biases: [H, Lq, Lk] or [B, H, Lq, Lk]
//                                                (fused path: pos.index_bias(), table gathered in the kernel)
//   [qk_norm: q, k = norm(q), norm(k) over dh, before the rotation]   (stability knobs,
//   [softcap: S = c * tanh(S / c), after the biases, before the masks]  nn/stability.h)
//   S = masked_fill(S, causal | key padding, -inf);  P = softmax(S);  P = dropout(P)
//   O = P v + pos.value_terms(P);  out = o_proj(merge_heads(O))
// Masked keys get probability exactly 0 and bias gradient exactly 0.
// KV cache: keys are cached already rotated; with a cache, k_offset must equal the cache
// length and the new keys are appended, so decoding token by token equals the full pass.
#pragma once
#include <memory>

#include "core/rng.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/positional/position_encoding.h"
#include "nn/stability.h"

namespace relpos::nn {

// The stability knob "scores + alpha * bias": a learnable (or fixed) scale of the additive
// position bias, one per layer or one per head.
// model.attention: the fused kernel where the layer, the encoding and the device allow it,
// or always the materialised scores.
enum class AttentionImpl { Fused, Reference };

struct BiasScaleConfig {
  bool enabled = false;
  bool learnable = true;
  double init = 1.0;
  bool per_head = false;
  bool operator==(const BiasScaleConfig&) const = default;
};

// Fused attention (k::attention) for layers whose scores are q k^T plus a Toeplitz bias
// (bucketed terms, index bias): on by default; off forces the materialised path everywhere
// (tests compare the two).
void set_fused_attention(bool on);
bool fused_attention_enabled();
// Whether a layer may take the fused kernel at all: model.attention fused, the global switch
// on, no softcap (the kernel has none), a device whose backend has the kernel (the CPU). The
// encoding then decides per call (MultiHeadAttention::use_fused; declared in the registry as
// PositionVariant::fused_attention, which the memory estimate reads).
bool fused_attention_possible(bool fused_config, double softcap, Device device);

struct AttentionConfig {
  int64_t d_model = 0, n_heads = 0;
  double dropout = 0.0;
  BiasScaleConfig bias_scale;
  AttnStability stability;  // qk_norm, softcap (nn/stability.h)
  bool fused = true;  // use k::attention where the encoding allows it (model.attention: fused)
};

struct KVCache {
  Variable k, v;  // [B, H, L, dh], keys rotated at their absolute positions
  int64_t length() const { return k.defined() ? k.size(2) : 0; }
};

struct AttentionStats {  // filled when a pointer is given (monitors)
  double max_abs_logit = 0;   // max |S| over unmasked cells
  double mean_entropy = 0;    // mean over (b, h, i) of -sum_j P log P
  Tensor row_max_abs_logit;   // [B, H, Lq]: max |S| of each query row (logit-growth monitors)
  // filled by TransformerBlock: its output's largest finite |value| and how many of its
  // values are NaN or ±inf (16-bit overflow and activation growth monitors)
  double max_abs_activation = 0;
  int64_t nonfinite_activations = 0;
  Tensor probs;               // [B, H, Lq, Lk] attention probabilities before dropout (shares
                              // storage); reference path only (the fused kernel never forms P)
};

// What one attention call attends: queries from xq [B, Lq, D], keys and values from xkv
// [B, Lk, D] (the same tensor for self-attention).
struct AttentionInput {
  Variable xq, xkv;
  bool causal = false;
  Tensor key_padding;                  // [B, Lk], nonzero = padding key (undefined: none)
  int64_t q_offset = 0, k_offset = 0;  // absolute positions of query 0 and key 0
  Tensor position_index;               // per-example index of index encodings (graph_spd: [B, L, L])
  Tensor positions;                    // per-token position channels [B, L, P] (ModelConfig::position_channels)
  Variable residual;  // [B, Lq, D], added to the output in the output projection's GEMM (undefined: none)
};

// What a call may read and write besides its output; each is optional.
struct AttentionSinks {
  KVCache* cache = nullptr;         // decoding: keys/values of earlier positions, extended in place
  Generator* gen = nullptr;         // dropout draws (training)
  AttentionStats* stats = nullptr;  // monitors: max |logit|, entropy
};

class MultiHeadAttention : public Module {
 public:
  // `own_pos`: register the encoding as this layer's submodule "pos" (per-layer tables);
  // otherwise the caller owns (and registers) a shared one.
  MultiHeadAttention(const AttentionConfig& cfg, PositionEncodingPtr pos, bool own_pos, Generator& gen,
                     DType dtype = DType::F32);

  // [B, Lq, D]. Scores S = scale (q k^T + position score terms) + position biases, masked;
  // softmax, dropout, P v (+ position value terms), output projection. The fused kernel
  // (k::attention) computes it where the encoding's scores allow (use_fused), else every
  // [B, H, Lq, Lk] tensor is materialised.
  Variable forward(const AttentionInput& in, const AttentionSinks& sinks = {}) const;

  const PositionEncodingPtr& position() const { return pos_; }
  const Variable& bias_scale() const { return alpha_; }

 private:
  Variable split_heads(const Variable& x) const;  // [B, L, D] -> [B, H, L, dh]
  struct Heads;                                   // q, k, v [B, H, L, dh] and the geometry they attend in
  struct Positions;                               // the position encoding's terms and biases for one call
  Heads project(const AttentionInput& in, KVCache* cache) const;
  Positions position_terms(const Heads& h, bool fusable) const;
  Positions channel_position_terms(const Heads& h, bool fusable) const;  // model.position.distance: a channel
  bool use_fused(const Positions& p, bool fusable) const;
  Variable fused(const Heads& h, const Positions& p, const AttentionInput& in, const AttentionSinks& sinks) const;
  Variable reference(const Heads& h, const Positions& p, const Tensor& kp, const AttentionSinks& sinks) const;
  AttentionConfig cfg_;
  int64_t head_dim_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, o_proj_;
  PositionEncodingPtr pos_;
  Variable alpha_;  // [1, 1] or [H, 1]
  std::shared_ptr<Norm> q_norm_, k_norm_;  // qk_norm over dh (undefined when off)
};

}  // namespace relpos::nn

template <>
struct relpos::EnumTable<relpos::nn::AttentionImpl> {
  static constexpr EnumName<nn::AttentionImpl> items[] = {{nn::AttentionImpl::Fused, "fused"},
                                                          {nn::AttentionImpl::Reference, "reference"}};
};
