// nn/models.h — the three model kinds, sized from a ModelConfig:
//   encoder          tokens [B, L] -> embed (+ absolute PE) -> N bidirectional blocks -> norm -> head -> [B, L, V]
//   decoder          causal LM, same shape; forward with a DecodeState decodes incrementally (KV cache)
//   encoder_decoder  T5 style: encoder over the source; decoder blocks add cross-attention
//                    (no position information in cross-attention) -> [B, Lt, V]
// Position encodings: one instance per stack shared by all its layers (T5 default), or one
// per layer (`position_shared = false`; the default of variants marked per_layer in the
// registry: shaw, fire, cope, music_transformer). An encoding with both shared and
// per-layer parameters (Transformer-XL: u, v shared, W_r per layer) keeps its shared part at
// "pos.*" and gives each layer its own part (make_layer) at "layers.N.attn.pos.*". The encoder
// and the decoder of an encoder-decoder have their own (bidirectional vs causal) encodings.
// A decoder can also run segment by segment with Transformer-XL memory (forward_with_memory).
// Parameter names: "embed.weight", "pos.*" (shared encoding), "layers.N.attn.q_proj.weight",
// "layers.N.attn.pos.*" (per-layer encoding), "layers.N.mlp.fc1.weight", "norm.ln.weight",
// "head.weight"; an encoder-decoder prefixes "encoder." and "decoder." (head at top level).
#pragma once
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nn/positional/registry.h"
#include "nn/transformer.h"

namespace relpos::nn {

// model.kind (its names: EnumTable<ModelKind> below; elsewhere kinds are compared as values).
enum class ModelKind { Encoder, Decoder, EncoderDecoder };

struct ModelConfig {
  ModelKind kind = ModelKind::Decoder;
  int64_t vocab = 0;
  int64_t d_model = 128, n_layers = 2, n_heads = 4, d_ff = 512;
  double dropout = 0.0;
  NormPlacement norm = NormPlacement::Pre;
  NormType norm_type = NormType::LayerNorm;
  int64_t max_len = 512;           // as the YAML default (docs/config.md)
  PositionType position;  // model.position.type, resolved to its registry entry
  // Names of the per-token position channels the input carries (ModelInput::positions, column p
  // = position_channels[p]); copied from data.position_channels, read by encodings that take
  // positions from data (PositionConfig::channels).
  std::vector<std::string> position_channels;
  AttentionImpl attention = AttentionImpl::Fused;
  PositionParams position_params;
  std::string position_distance = "index";  // model.position.distance: "index" or a position channel
  std::optional<bool> position_shared;  // default: the registry's per_layer (shaw, fire, cope, music_transformer)
  BiasScaleConfig bias_scale;
  AttnStability stability;          // model.qk_norm, model.attn_softcap (self-attention)
  int64_t mem_len = 0;              // model.mem_len: Transformer-XL segment memory in training (decoder, text)
  double init_std = 0.02;           // embeddings
  double position_std = 0.02;       // position tables
  DType dtype = DType::F32;
  bool operator==(const ModelConfig&) const = default;
};

struct DecodeState {
  std::vector<BlockState> blocks;
  int64_t position = 0;  // tokens decoded so far
};

// Transformer-XL segment-level recurrence (decoder). Per layer, the hidden states that entered
// that layer over the last (up to) mem_len positions, detached (no gradient flows into them or
// into the computation that made them). A segment of L tokens is placed at positions M..M+L-1
// with the memory at 0..M-1 (M = length()); afterwards the memory keeps, per layer, the last
// mem_len positions of [memory; this segment's layer input] (TXL's _update_mems, ext_len 0).
// mem_len 0 keeps nothing (every segment is evaluated alone).
struct SegmentMemory {
  explicit SegmentMemory(int64_t mem_len = 0) : mem_len(mem_len) {}
  int64_t mem_len;
  std::vector<Tensor> layers;  // per layer: [B, M, D]; empty before the first segment
  int64_t length() const { return layers.empty() ? 0 : layers.front().size(1); }
  void reset() { layers.clear(); }
};

class TransformerStack : public Module {
 public:
  TransformerStack(const ModelConfig& cfg, bool causal, bool cross_attention, Generator& gen);
  // tokens: int64 [B, L] -> hidden [B, L, D]
  Variable forward(const Tensor& tokens, const Tensor& padding, int64_t offset, const Variable& memory,
                   const Tensor& memory_padding, DecodeState* state, Generator* gen,
                   std::vector<AttentionStats>* stats, const Tensor& position_index = Tensor(),
                   const Tensor& positions = Tensor()) const;
  // Causal stacks: the segment tokens [B, L] attend to mem as well (see SegmentMemory), which
  // is then updated. -> hidden [B, L, D]
  Variable forward_with_memory(const Tensor& tokens, SegmentMemory& mem, Generator* gen,
                               std::vector<AttentionStats>* stats) const;
  const PositionEncodingPtr& position() const { return pos_; }
  const std::vector<std::shared_ptr<TransformerBlock>>& blocks() const { return layers_; }  // inspection
  bool causal() const { return causal_; }

 private:
  void check_positions(const Tensor& tokens, const Tensor& positions) const;
  ModelConfig cfg_;
  bool causal_;
  std::shared_ptr<Embedding> embed_;
  PositionEncodingPtr pos_;  // shared instance (also used for absolute embeddings)
  std::vector<std::shared_ptr<TransformerBlock>> layers_;
  std::shared_ptr<Norm> norm_;
};

// One batch's inputs, whatever the model kind (trainers' Batch holds these plus the targets).
struct ModelInput {
  Tensor tokens;          // [B, L]  encoder / decoder tokens, or the encoder-decoder source
  Tensor dec_input;       // [B, L'] encoder-decoder decoder input (BOS + target); else undefined
  Tensor padding;         // [B, L]  1 = padding, or undefined
  Tensor position_index;  // [B, L, L] int64 per-example structure (graph_spd), or undefined
  Tensor positions;       // [B, L, P] int64 per-token position channels (ModelConfig::position_channels), or undefined
};

class Model : public Module {
 public:
  explicit Model(const ModelConfig& cfg, uint64_t seed = 0);
  const ModelConfig& config() const { return cfg_; }

  // encoder / decoder: tokens [B, L] -> logits [B, L, V]. padding [B, L] (1 = pad) optional.
  // position_index: per-example structure for index-based encodings ([B, L, L] int64);
  // positions: per-token position channels ([B, L, P] int64, ModelConfig::position_channels).
  Variable forward(const Tensor& tokens, const Tensor& padding = Tensor(), Generator* gen = nullptr,
                   std::vector<AttentionStats>* stats = nullptr, const Tensor& position_index = Tensor(),
                   const Tensor& positions = Tensor()) const;
  // Any kind: logits [B, L', V] of a batch (forward, or forward_seq2seq for encoder_decoder);
  // the one place the model kind picks the forward.
  Variable logits(const ModelInput& in, Generator* gen = nullptr, std::vector<AttentionStats>* stats = nullptr) const;
  // encoder_decoder: source [B, Ls], target input [B, Lt] -> logits [B, Lt, V]
  Variable forward_seq2seq(const Tensor& source, const Tensor& target, const Tensor& source_padding = Tensor(),
                           Generator* gen = nullptr, std::vector<AttentionStats>* stats = nullptr) const;
  // decoder: feed the next tokens [B, n] at state.position; returns logits [B, n, V].
  Variable decode_step(const Tensor& tokens, DecodeState& state) const;
  // decoder: one segment [B, L] with Transformer-XL memory of the previous segments; returns
  // logits [B, L, V] and updates mem. Needs a relative (non-absolute) position encoding.
  Variable forward_with_memory(const Tensor& tokens, SegmentMemory& mem, Generator* gen = nullptr,
                               std::vector<AttentionStats>* stats = nullptr) const;
  // Inspection: the stack whose self-attention `forward` runs (decoder, or the encoder).
  const TransformerStack& main_stack() const { return encoder_ && !decoder_ ? *encoder_ : *decoder_; }

 private:
  ModelConfig cfg_;
  std::shared_ptr<TransformerStack> encoder_, decoder_;
  std::shared_ptr<Linear> head_;
};

// Cross-field checks with messages naming the fields (d_model % n_heads, kind, norm, ...).
void validate(const ModelConfig& cfg);
// The one rule for encoder-only encodings: a stack with causal self-attention (a decoder, or an
// encoder-decoder's decoder: `causal`) refuses one, as a ConfigError naming model.position.type
// and model.kind.
void check_causal_position(const PositionType& position, bool causal, ModelKind kind);

// The position-encoding settings a model of this config builds its encodings from.
PositionConfig position_config(const ModelConfig& cfg);
// Whether a stack's layers share one position encoding (model.position.shared, else the
// registry's per_layer default): the model and the memory estimate both ask here.
bool position_table_shared(const ModelConfig& cfg);

}  // namespace relpos::nn

template <>
struct relpos::EnumTable<relpos::nn::ModelKind> {
  static constexpr EnumName<nn::ModelKind> items[] = {{nn::ModelKind::Encoder, "encoder"},
                                                      {nn::ModelKind::Decoder, "decoder"},
                                                      {nn::ModelKind::EncoderDecoder, "encoder_decoder"}};
};
