// nn/models.h — the three model kinds, sized from a ModelConfig:
//   encoder          tokens [B, L] -> embed (+ absolute PE) -> N bidirectional blocks -> norm -> head -> [B, L, V]
//   decoder          causal LM, same shape; forward with a DecodeState decodes incrementally (KV cache)
//   encoder_decoder  T5 style: encoder over the source; decoder blocks add cross-attention
//                    (no position information in cross-attention) -> [B, Lt, V]
// Position encodings: one instance per stack shared by all its layers (T5 default), or one
// per layer (`position_shared = false`; the default of variants marked per_layer in the
// registry: shaw, fire, cope). The encoder and the decoder of an
// encoder-decoder have their own (bidirectional vs causal) encodings.
// Parameter names: "embed.weight", "pos.*" (shared encoding), "layers.N.attn.q_proj.weight",
// "layers.N.attn.pos.*" (per-layer encoding), "layers.N.mlp.fc1.weight", "norm.ln.weight",
// "head.weight"; an encoder-decoder prefixes "encoder." and "decoder." (head at top level).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/positional/registry.h"
#include "nn/transformer.h"

namespace relpos::nn {

struct ModelConfig {
  std::string kind = "decoder";  // encoder | decoder | encoder_decoder
  int64_t vocab = 0;
  int64_t d_model = 128, n_layers = 2, n_heads = 4, d_ff = 512;
  double dropout = 0.0;
  std::string norm = "pre";
  std::string norm_type = "layernorm";
  int64_t max_len = 256;
  std::string position = "none";
  PositionParams position_params;
  std::optional<bool> position_shared;  // default: the registry's per_layer (shaw, fire, cope)
  BiasScaleConfig bias_scale;
  double init_std = 0.02;           // embeddings
  double position_std = 0.02;       // position tables
  DType dtype = DType::F32;
};

struct DecodeState {
  std::vector<BlockState> blocks;
  int64_t position = 0;  // tokens decoded so far
};

class TransformerStack : public Module {
 public:
  TransformerStack(const ModelConfig& cfg, bool causal, bool cross_attention, Generator& gen);
  // tokens: int64 [B, L] -> hidden [B, L, D]
  Variable forward(const Tensor& tokens, const Tensor& padding, int64_t offset, const Variable& memory,
                   const Tensor& memory_padding, DecodeState* state, Generator* gen,
                   std::vector<AttentionStats>* stats, const Tensor& position_index = Tensor()) const;
  const PositionEncodingPtr& position() const { return pos_; }

 private:
  ModelConfig cfg_;
  bool causal_;
  std::shared_ptr<Embedding> embed_;
  PositionEncodingPtr pos_;  // shared instance (also used for absolute embeddings)
  std::vector<std::shared_ptr<TransformerBlock>> layers_;
  std::shared_ptr<Norm> norm_;
};

class Model : public Module {
 public:
  explicit Model(const ModelConfig& cfg, uint64_t seed = 0);
  const ModelConfig& config() const { return cfg_; }

  // encoder / decoder: tokens [B, L] -> logits [B, L, V]. padding [B, L] (1 = pad) optional.
  // position_index: per-example structure for index-based encodings ([B, L, L] int64).
  Variable forward(const Tensor& tokens, const Tensor& padding = Tensor(), Generator* gen = nullptr,
                   std::vector<AttentionStats>* stats = nullptr, const Tensor& position_index = Tensor()) const;
  // encoder_decoder: source [B, Ls], target input [B, Lt] -> logits [B, Lt, V]
  Variable forward_seq2seq(const Tensor& source, const Tensor& target, const Tensor& source_padding = Tensor(),
                           Generator* gen = nullptr, std::vector<AttentionStats>* stats = nullptr) const;
  // decoder: feed the next tokens [B, n] at state.position; returns logits [B, n, V].
  Variable decode_step(const Tensor& tokens, DecodeState& state) const;

 private:
  ModelConfig cfg_;
  std::shared_ptr<TransformerStack> encoder_, decoder_;
  std::shared_ptr<Linear> head_;
};

// Cross-field checks with messages naming the fields (d_model % n_heads, kind, norm, ...).
void validate(const ModelConfig& cfg);

}  // namespace relpos::nn
