// nn/transformer.h — a transformer block and a stack of blocks.
// pre-LN (default):  x = x + drop(attn(norm1(x)));  [x = x + drop(cross(norm_c(x), mem))];
//                    x = x + drop(mlp(norm2(x)))
// post-LN:           x = norm1(x + drop(attn(x)));  [x = norm_c(x + drop(cross(x, mem)))];
//                    x = norm2(x + drop(mlp(x)))
// A pre-LN stack ends with a final norm; a post-LN stack does not need one.
#pragma once
#include <memory>
#include <vector>

#include "nn/attention.h"
#include "nn/layers.h"

namespace relpos::nn {

// model.norm: where the norms sit (see above).
enum class NormPlacement { Pre, Post };

struct BlockConfig {
  int64_t d_model = 128, n_heads = 4, d_ff = 512;
  double dropout = 0.0;
  NormPlacement norm = NormPlacement::Pre;
  NormType norm_type = NormType::LayerNorm;
  bool cross_attention = false;     // decoder blocks of an encoder-decoder
  BiasScaleConfig bias_scale;
  AttnStability stability;          // self-attention only (nn/stability.h)
  bool fused_attention = true;      // model.attention: fused | reference
};

struct BlockState {  // per-block decoding state
  KVCache self;
  // Transformer-XL segment memory: [B, M, D], the hidden states that entered this block over
  // the previous M positions, without gradient. When set, self-attention also attends to them
  // as keys/values at positions offset - M .. offset - 1 (not combined with the KV cache).
  Tensor memory;
};

class TransformerBlock : public Module {
 public:
  TransformerBlock(const BlockConfig& cfg, PositionEncodingPtr pos, bool own_pos, Generator& gen,
                   DType dtype = DType::F32);
  // x: [B, L, D]; memory: [B, Lm, D] (cross-attention) with memory_padding [B, Lm].
  Variable forward(const Variable& x, bool causal, const Tensor& padding, int64_t offset, const Variable& memory,
                   const Tensor& memory_padding, BlockState* state, Generator* gen, AttentionStats* stats,
                   const Tensor& position_index = Tensor(), const Tensor& positions = Tensor()) const;
  const MultiHeadAttention& self_attention() const { return *attn_; }  // inspection

 private:
  static void monitor_output(const Tensor& y, AttentionStats& stats);
  BlockConfig cfg_;
  std::shared_ptr<MultiHeadAttention> attn_, cross_;
  std::shared_ptr<MLP> mlp_;
  std::shared_ptr<Norm> norm1_, norm2_, norm_c_;
};

}  // namespace relpos::nn

template <>
struct relpos::EnumTable<relpos::nn::NormPlacement> {
  static constexpr EnumName<nn::NormPlacement> items[] = {{nn::NormPlacement::Pre, "pre"},
                                                          {nn::NormPlacement::Post, "post"}};
};
