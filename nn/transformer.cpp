#include "nn/transformer.h"

#include "autograd/ops.h"
#include "kernels/ops.h"
#include "nn/positional/registry.h"
#include "nn/stability.h"

namespace relpos::nn {

TransformerBlock::TransformerBlock(const BlockConfig& cfg, PositionEncodingPtr pos, bool own_pos, Generator& gen,
                                   DType dtype)
    : cfg_(cfg) {
  AttentionConfig ac{cfg.d_model, cfg.n_heads, cfg.dropout, cfg.bias_scale, cfg.stability, cfg.fused_attention};
  attn_ = register_module("attn", std::make_shared<MultiHeadAttention>(ac, std::move(pos), own_pos, gen, dtype));
  norm1_ = register_module("norm1", std::make_shared<Norm>(cfg.norm_type, cfg.d_model, dtype));
  if (cfg.cross_attention) {
    // T5 style: cross-attention carries no position information.
    PositionConfig none;
    none.d_model = cfg.d_model;
    none.n_heads = cfg.n_heads;
    none.head_dim = cfg.d_model / cfg.n_heads;
    AttentionConfig cc{cfg.d_model, cfg.n_heads, cfg.dropout, {}, {}, cfg.fused_attention};
    cross_ = register_module("cross_attn",
                             std::make_shared<MultiHeadAttention>(cc, make_position_encoding(none, gen), false, gen, dtype));
    norm_c_ = register_module("norm_cross", std::make_shared<Norm>(cfg.norm_type, cfg.d_model, dtype));
  }
  mlp_ = register_module("mlp", std::make_shared<MLP>(cfg.d_model, cfg.d_ff, cfg.dropout, gen, dtype));
  norm2_ = register_module("norm2", std::make_shared<Norm>(cfg.norm_type, cfg.d_model, dtype));
}

Variable TransformerBlock::forward(const Variable& x, bool causal, const Tensor& padding, int64_t offset,
                                   const Variable& memory, const Tensor& memory_padding, BlockState* state,
                                   Generator* gen, AttentionStats* stats, const Tensor& position_index,
                                   const Tensor& positions) const {
  const bool pre = cfg_.norm == NormPlacement::Pre;
  const bool train = is_training();
  KVCache* cache = state ? &state->self : nullptr;
  const Tensor mem = state ? state->memory : Tensor();
  // h: this segment's attention input (after norm1 in pre-LN). Memory goes through the same
  // norm, so its keys/values are those the layer would compute for the positions themselves.
  // residual: added to the attention's output in its output projection (undefined: none).
  // Position channels describe this call's tokens only: queries and keys are the same L rows.
  RELPOS_CHECK(!positions.defined() || (offset == 0 && !mem.defined() && (!cache || cache->length() == 0)),
               "block: per-token position channels need queries and keys that are the input's tokens (no KV cache, "
               "segment memory or offset; got offset {})",
               offset);
  auto self_attn = [&](const Variable& h, const Variable& residual) {
    if (!mem.defined())
      return attn_->forward({.xq = h,
                             .xkv = h,
                             .causal = causal,
                             .key_padding = padding,
                             .q_offset = offset,
                             .k_offset = offset,
                             .position_index = position_index,
                             .positions = positions,
                             .residual = residual},
                            {.cache = cache, .gen = gen, .stats = stats});
    RELPOS_CHECK(cache->length() == 0, "block: segment memory cannot be combined with a KV cache");
    RELPOS_CHECK(mem.dim() == 3 && mem.size(0) == h.size(0) && mem.size(2) == h.size(2),
                 "block: segment memory must be [B, M, D] = [{}, M, {}], got {}", h.size(0), h.size(2),
                 shape_str(mem.shape()));
    const int64_t M = mem.size(1);
    Variable m(mem);  // no gradient into the memory
    Variable kv = cat({pre ? norm1_->forward(m) : m, h}, 1);
    Tensor kp;
    if (padding.defined()) kp = k::cat({Tensor::zeros({h.size(0), M}, padding.dtype(), padding.device()), padding}, 1);
    return attn_->forward({.xq = h,
                           .xkv = kv,
                           .causal = causal,
                           .key_padding = kp,
                           .q_offset = offset,
                           .k_offset = offset - M,
                           .position_index = position_index,
                           .residual = residual},
                          {.gen = gen, .stats = stats});
  };
  // h + dropout(sublayer(input)): without dropout the add is the sublayer's last GEMM's epilogue
  // (sublayer(input, h); the same values, one pass over [B, L, D] fewer), else an add.
  const bool fuse = !dropout_applies(cfg_.dropout, train, gen);
  const auto residual = [&](const Variable& h, const auto& sublayer, const Variable& input) -> Variable {
    if (fuse) return sublayer(input, h);
    return h + apply_dropout(sublayer(input, Variable()), cfg_.dropout, train, gen);
  };
  Variable h = x;
  if (pre) {
    h = residual(h, self_attn, norm1_->forward(h));
  } else {
    h = norm1_->forward(residual(h, self_attn, h));
  }
  if (cross_) {
    RELPOS_CHECK(memory.defined(), "decoder block with cross-attention needs the encoder output");
    const auto cross = [&](const Variable& q, const Variable& r) {
      return cross_->forward({.xq = q, .xkv = memory, .key_padding = memory_padding, .q_offset = offset, .residual = r},
                             {.gen = gen});
    };
    h = pre ? residual(h, cross, norm_c_->forward(h)) : norm_c_->forward(residual(h, cross, h));
  }
  const auto mlp = [&](const Variable& in, const Variable& r) { return mlp_->forward(in, gen, r); };
  Variable out = pre ? residual(h, mlp, norm2_->forward(h)) : norm2_->forward(residual(h, mlp, h));
  if (stats) monitor_output(out.data(), *stats);
  return out;
}

// The block output's monitors (logging steps only: two host reads).
void TransformerBlock::monitor_output(const Tensor& y, AttentionStats& stats) {
  const Tensor a = k::unary(k::Unary::Abs, y);
  const Tensor finite = finite_mask(a);  // NaN and inf: 0
  stats.nonfinite_activations = y.numel() - int64_t(k::sum(finite).item());
  stats.max_abs_activation =
      k::reduce(k::Reduce::Max, k::where(finite, a, Tensor::zeros({}, a.dtype(), a.device())), {}, false).item();
}

}  // namespace relpos::nn
