#include "nn/models.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/ops.h"

namespace relpos::nn {

void validate(const ModelConfig& c) {
  RELPOS_CHECK(c.vocab > 0, "model: vocab size must be positive, got {}", c.vocab);
  RELPOS_CHECK(c.d_model > 0 && c.n_layers > 0 && c.n_heads > 0 && c.d_ff > 0,
               "model: d_model ({}), n_layers ({}), n_heads ({}), d_ff ({}) must be positive", c.d_model, c.n_layers,
               c.n_heads, c.d_ff);
  RELPOS_CHECK(c.d_model % c.n_heads == 0, "model.d_model ({}) must be divisible by model.n_heads ({})", c.d_model,
               c.n_heads);
  RELPOS_CHECK(c.dropout >= 0 && c.dropout < 1, "model.dropout must be in [0, 1), got {}", c.dropout);
  RELPOS_CHECK(c.max_len > 0, "model.max_len must be positive, got {}", c.max_len);
  check_causal_position(c.position, c.kind != ModelKind::Encoder, c.kind);
}

void check_causal_position(const PositionType& position, bool causal, ModelKind kind) {
  RELPOS_CHECK_CONFIG(!causal || position->causal_capable,
                      "model.position.type '{}' is encoder-only (bidirectional attention); model.kind '{}' has causal "
                      "self-attention: use model.kind encoder",
                      position, kind);
}

bool position_table_shared(const ModelConfig& cfg) {
  return cfg.position_shared.value_or(!cfg.position->per_layer);
}

PositionConfig position_config(const ModelConfig& cfg) {
  PositionConfig pc;
  pc.type = cfg.position.name();
  pc.d_model = cfg.d_model;
  pc.n_heads = cfg.n_heads;
  pc.head_dim = cfg.d_model / cfg.n_heads;
  pc.max_len = cfg.max_len;
  pc.init_std = cfg.position_std;
  pc.params = cfg.position_params;
  pc.distance = cfg.position_distance;
  pc.channels = cfg.position_channels;
  pc.dtype = cfg.dtype;
  return pc;
}

TransformerStack::TransformerStack(const ModelConfig& cfg, bool causal, bool cross_attention, Generator& gen)
    : cfg_(cfg), causal_(causal) {
  embed_ = register_module("embed", std::make_shared<Embedding>(cfg.vocab, cfg.d_model, cfg.init_std, gen, cfg.dtype));
  PositionConfig pc = position_config(cfg);
  const bool share = position_table_shared(cfg);
  pc.shared_across_layers = share;
  pos_ = make_position_encoding(pc, gen);
  RELPOS_CHECK(causal || !pos_->causal_only(), "position encoding '{}' is causal-only; it cannot be used in an encoder",
               cfg.position);
  check_causal_position(cfg.position, causal, cfg.kind);
  const bool shared = pos_->is_absolute() || share;
  pc.shared_across_layers = false;
  if (shared) register_module("pos", pos_);  // per-layer encodings live in layers.N.attn.pos
  BlockConfig bc{cfg.d_model,   cfg.n_heads,     cfg.d_ff,       cfg.dropout,   cfg.norm,
                 cfg.norm_type, cross_attention, cfg.bias_scale, cfg.stability, cfg.attention == AttentionImpl::Fused};
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    // Shared: the instance itself, or its per-layer part (Transformer-XL's W_r) if it has one.
    PositionEncodingPtr p = shared ? pos_->make_layer(gen) : make_position_encoding(pc, gen);
    const bool own = p != nullptr;
    if (!p) p = pos_;
    layers_.push_back(register_module(fmt::format("layers.{}", i),
                                      std::make_shared<TransformerBlock>(bc, p, own, gen, cfg.dtype)));
  }
  if (cfg.norm == NormPlacement::Pre)
    norm_ = register_module("norm", std::make_shared<Norm>(cfg.norm_type, cfg.d_model, cfg.dtype));
}

// Per-token position channels, when given, are int64 [B, L, P] with one column per name of
// model.position_channels (the data's), for the tokens' rows.
void TransformerStack::check_positions(const Tensor& tokens, const Tensor& positions) const {
  if (!positions.defined()) return;
  const int64_t P = int64_t(cfg_.position_channels.size());
  RELPOS_CHECK(positions.dtype() == DType::I64 && positions.dim() == 3 && positions.size(0) == tokens.size(0) &&
                   positions.size(1) == tokens.size(1) && positions.size(2) == P,
               "model input: position channels must be int64 [B, L, P] = [{}, {}, {}] (P: model.position_channels "
               "[{}]), got {}",
               tokens.size(0), tokens.size(1), P, fmt::join(cfg_.position_channels, ", "), describe(positions));
}

Variable TransformerStack::forward(const Tensor& tokens, const Tensor& padding, int64_t offset, const Variable& memory,
                                   const Tensor& memory_padding, DecodeState* state, Generator* gen,
                                   std::vector<AttentionStats>* stats, const Tensor& position_index,
                                   const Tensor& positions) const {
  RELPOS_CHECK(tokens.dim() == 2 && tokens.dtype() == DType::I64, "model input must be int64 [B, L], got {}",
               describe(tokens));
  check_positions(tokens, positions);
  const StackInput in{positions, padding, offset};
  Variable x = pos_->embed_input(embed_->forward(tokens), in);  // absolute encodings add here
  if (stats) stats->assign(layers_.size(), {});
  if (state && state->blocks.size() != layers_.size()) state->blocks.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    x = layers_[i]->forward(x, causal_, padding, offset, memory, memory_padding, state ? &state->blocks[i] : nullptr,
                            gen, stats ? &(*stats)[i] : nullptr, position_index, positions);
    x = pos_->after_block(x, int64_t(i), in);  // conditional encodings (cpe) add here
  }
  return norm_ ? norm_->forward(x) : x;
}

Variable TransformerStack::forward_with_memory(const Tensor& tokens, SegmentMemory& mem, Generator* gen,
                                               std::vector<AttentionStats>* stats) const {
  RELPOS_CHECK(causal_, "segment memory needs a causal (decoder) stack");
  RELPOS_CHECK(!pos_->is_absolute(),
               "segment memory needs a relative position encoding; '{}' adds absolute positions to the input, "
               "which would place the memory at inconsistent positions",
               cfg_.position);
  RELPOS_CHECK(tokens.dim() == 2 && tokens.dtype() == DType::I64, "model input must be int64 [B, L], got {}",
               describe(tokens));
  RELPOS_CHECK(mem.mem_len >= 0, "segment memory: mem_len must be >= 0, got {}", mem.mem_len);
  RELPOS_CHECK(mem.layers.empty() || (mem.layers.size() == layers_.size() && mem.layers[0].size(0) == tokens.size(0)),
               "segment memory holds {} layers of batch {}, the model has {} layers and the batch is {}",
               mem.layers.size(), mem.layers.empty() ? 0 : mem.layers[0].size(0), layers_.size(), tokens.size(0));
  const int64_t M = mem.length(), L = tokens.size(1);
  Variable x = embed_->forward(tokens);
  if (stats) stats->assign(layers_.size(), {});
  std::vector<Tensor> next(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    BlockState st;
    if (M > 0) st.memory = mem.layers[i];
    // The new memory: the last mem_len positions of [memory; layer input], detached.
    const int64_t keep = std::min(mem.mem_len, M + L);
    if (keep > 0) {
      Tensor all = M > 0 ? k::cat({mem.layers[i], x.data()}, 1) : x.data();
      next[i] = all.narrow(1, M + L - keep, keep).clone();
    }
    x = layers_[i]->forward(x, causal_, Tensor(), M, Variable(), Tensor(), &st, gen, stats ? &(*stats)[i] : nullptr);
  }
  if (mem.mem_len > 0) mem.layers = std::move(next);
  else mem.layers.clear();
  return norm_ ? norm_->forward(x) : x;
}

Model::Model(const ModelConfig& cfg, uint64_t seed) : cfg_(cfg) {
  validate(cfg);
  Generator gen(seed);
  if (cfg.kind == ModelKind::EncoderDecoder) {
    encoder_ = register_module("encoder", std::make_shared<TransformerStack>(cfg, false, false, gen));
    decoder_ = register_module("decoder", std::make_shared<TransformerStack>(cfg, true, true, gen));
  } else if (cfg.kind == ModelKind::Encoder) {
    encoder_ = register_module("stack", std::make_shared<TransformerStack>(cfg, false, false, gen));
  } else {
    decoder_ = register_module("stack", std::make_shared<TransformerStack>(cfg, true, false, gen));
  }
  head_ = register_module("head", std::make_shared<Linear>(cfg.d_model, cfg.vocab, false, gen, cfg.dtype));
}

Variable Model::forward(const Tensor& tokens, const Tensor& padding, Generator* gen,
                        std::vector<AttentionStats>* stats, const Tensor& position_index,
                        const Tensor& positions) const {
  RELPOS_CHECK(cfg_.kind != ModelKind::EncoderDecoder, "Model::forward: an encoder_decoder needs forward_seq2seq");
  const auto& stack = encoder_ ? encoder_ : decoder_;
  return head_->forward(
      stack->forward(tokens, padding, 0, Variable(), Tensor(), nullptr, gen, stats, position_index, positions));
}

Variable Model::logits(const ModelInput& in, Generator* gen, std::vector<AttentionStats>* stats) const {
  return cfg_.kind == ModelKind::EncoderDecoder ? forward_seq2seq(in.tokens, in.dec_input, in.padding, gen, stats)
                                        : forward(in.tokens, in.padding, gen, stats, in.position_index, in.positions);
}

Variable Model::forward_seq2seq(const Tensor& source, const Tensor& target, const Tensor& source_padding,
                                Generator* gen, std::vector<AttentionStats>* stats) const {
  RELPOS_CHECK(cfg_.kind == ModelKind::EncoderDecoder, "Model::forward_seq2seq: model kind is '{}'", cfg_.kind);
  Variable memory = encoder_->forward(source, source_padding, 0, Variable(), Tensor(), nullptr, gen, nullptr);
  return head_->forward(decoder_->forward(target, Tensor(), 0, memory, source_padding, nullptr, gen, stats));
}

Variable Model::forward_with_memory(const Tensor& tokens, SegmentMemory& mem, Generator* gen,
                                   std::vector<AttentionStats>* stats) const {
  RELPOS_CHECK(cfg_.kind == ModelKind::Decoder, "forward_with_memory: only decoder models keep segment memory (kind '{}')",
               cfg_.kind);
  return head_->forward(decoder_->forward_with_memory(tokens, mem, gen, stats));
}

Variable Model::decode_step(const Tensor& tokens, DecodeState& state) const {
  RELPOS_CHECK(cfg_.kind == ModelKind::Decoder, "decode_step: only decoder models decode incrementally (kind '{}')", cfg_.kind);
  Variable h = decoder_->forward(tokens, Tensor(), state.position, Variable(), Tensor(), &state, nullptr, nullptr);
  state.position += tokens.size(1);
  return head_->forward(h);
}

}  // namespace relpos::nn
