#include "relpos/nn/attention.h"

#include <cmath>
#include <limits>

#include "relpos/autograd/grad_mode.h"
#include "relpos/autograd/ops.h"
#include "relpos/nn/layers.h"

namespace relpos::nn {

namespace {
bool g_fused_attention = true;
}  // namespace
void set_fused_attention(bool on) { g_fused_attention = on; }
bool fused_attention_enabled() { return g_fused_attention; }

MultiHeadAttention::MultiHeadAttention(const AttentionConfig& cfg, PositionEncodingPtr pos, bool own_pos,
                                       Generator& gen, DType dtype)
    : cfg_(cfg), pos_(std::move(pos)) {
  RELPOS_CHECK(cfg.n_heads > 0 && cfg.d_model % cfg.n_heads == 0,
               "attention: d_model {} must be divisible by n_heads {}", cfg.d_model, cfg.n_heads);
  RELPOS_CHECK(pos_ != nullptr, "attention: a position encoding is required (use type 'none')");
  head_dim_ = cfg.d_model / cfg.n_heads;
  q_proj_ = register_module("q_proj", std::make_shared<Linear>(cfg.d_model, cfg.d_model, true, gen, dtype));
  k_proj_ = register_module("k_proj", std::make_shared<Linear>(cfg.d_model, cfg.d_model, true, gen, dtype));
  v_proj_ = register_module("v_proj", std::make_shared<Linear>(cfg.d_model, cfg.d_model, true, gen, dtype));
  o_proj_ = register_module("o_proj", std::make_shared<Linear>(cfg.d_model, cfg.d_model, true, gen, dtype));
  if (own_pos) register_module("pos", pos_);
  if (cfg.bias_scale.enabled) {
    Tensor a = Tensor::full({cfg.bias_scale.per_head ? cfg.n_heads : 1, 1}, cfg.bias_scale.init, dtype);
    // not learnable: a buffer, so to() moves it (not in state_dict: the config recreates it)
    alpha_ = cfg.bias_scale.learnable ? register_parameter("bias_scale", a, group::kPosition)
                                      : register_buffer("bias_scale", a);
  }
  // Stability knob: QK-norm over the head dim (nn/stability.h).
  if (cfg.stability.qk_norm != "none") {
    q_norm_ = register_module("q_norm", std::make_shared<Norm>(cfg.stability.qk_norm, head_dim_, dtype));
    k_norm_ = register_module("k_norm", std::make_shared<Norm>(cfg.stability.qk_norm, head_dim_, dtype));
  }
}

Variable MultiHeadAttention::split_heads(const Variable& x) const {
  return transpose(reshape(x, {x.size(0), x.size(1), cfg_.n_heads, head_dim_}), 1, 2);
}

Variable MultiHeadAttention::forward(const Variable& xq, const Variable& xkv, bool causal, const Tensor& key_padding,
                                     int64_t q_offset, int64_t k_offset, KVCache* cache, Generator* gen,
                                     AttentionStats* stats, const Tensor& position_index) const {
  RELPOS_CHECK(xq.dim() == 3 && xkv.dim() == 3 && xq.size(-1) == cfg_.d_model && xkv.size(-1) == cfg_.d_model &&
                   xq.size(0) == xkv.size(0),
               "attention: expected [B, Lq, {0}] and [B, Lk, {0}], got {1} and {2}", cfg_.d_model,
               shape_str(xq.shape()), shape_str(xkv.shape()));
  RELPOS_CHECK(!(pos_->causal_only() && !causal), "position encoding '{}' only works with causal attention",
               pos_->type());
  const int64_t B = xq.size(0), Lq = xq.size(1);
  Variable q = split_heads(q_proj_->forward(xq));   // [B, H, Lq, dh]
  Variable k = split_heads(k_proj_->forward(xkv));  // [B, H, Lk_new, dh]
  if (q_norm_) q = q_norm_->forward(q), k = k_norm_->forward(k);  // stability: qk_norm
  q = pos_->rotate(q, q_offset);
  k = pos_->rotate_key(k, k_offset);
  Variable v = split_heads(v_proj_->forward(xkv));
  if (cache) {
    RELPOS_CHECK(k_offset == cache->length(), "attention: KV cache holds {} positions but k_offset is {}",
                 cache->length(), k_offset);
    if (cache->length() > 0) {
      k = cat({cache->k, k}, 2);
      v = cat({cache->v, v}, 2);
      k_offset = 0;
    }
    cache->k = k;
    cache->v = v;
  }
  const int64_t Lk = k.size(2);
  AttnGeometry geo{Lq, Lk, q_offset, k_offset, causal, position_index};
  geo.q_proj = [this](const Variable& x) { return q_proj_->forward(x); };
  geo.k_proj = [this](const Variable& x) { return k_proj_->forward(x); };

  // The fused kernel serves scores q k^T + Toeplitz bias (+ bucketed content terms, + a
  // table-lookup bias), with dropout on P drawn inside it, when no softcap applies; otherwise
  // everything is materialised.
  const bool dropout_active = cfg_.dropout > 0 && is_training() && gen != nullptr;  // as apply_dropout
  const bool fusable = cfg_.fused && fused_attention_enabled() && q.device() == Device::CPU &&
                       !(cfg_.stability.softcap > 0);
  const PositionEncoding::Buckets buckets = fusable ? pos_->bucketed_terms(geo) : PositionEncoding::Buckets{};
  Variable terms = buckets.keys.defined() ? Variable() : pos_->score_terms(q, k, geo);  // [B, H, Lq, Lk] or none
  const double scale = pos_->score_scale(head_dim_);
  Variable bias = pos_->toeplitz_bias(geo);  // [H, Lq + Lk - 1]
  if (bias.defined() && alpha_.defined()) bias = bias * alpha_;
  // A table-lookup bias goes into the kernel as table + index (no [H, Lq, Lk]); score_bias
  // materialises the same bias for the reference path.
  const bool fuse_index = fusable && !buckets.keys.defined() && !terms.defined() && !pos_->has_value_terms();
  PositionEncoding::IndexBias ibias = fuse_index ? pos_->index_bias(geo) : PositionEncoding::IndexBias{};
  if (ibias.table.defined()) {
    const int64_t H = cfg_.n_heads;
    const Tensor& ix = ibias.index;
    RELPOS_CHECK(ibias.table.dim() == 2 && ibias.table.size(1) == H && ix.defined() && ix.dtype() == DType::I64 &&
                     ((ix.dim() == 2 && ix.size(0) == Lq && ix.size(1) == Lk) ||
                      (ix.dim() == 3 && ix.size(0) == B && ix.size(1) == Lq && ix.size(2) == Lk)),
                 "attention: position encoding '{}' returned an index bias with table {} and index {} for a score "
                 "bias [B, H, Lq, Lk] = [{}, {}, {}, {}]; expected table [NT, H] = [NT, {}] and index int64 "
                 "[Lq, Lk] = [{}, {}] or [B, Lq, Lk] = [{}, {}, {}]",
                 pos_->type(), shape_str(ibias.table.shape()), describe(ix), B, H, Lq, Lk, H, Lq, Lk, B, Lq, Lk);
    if (alpha_.defined()) ibias.table = ibias.table * reshape(alpha_, {1, alpha_.size(0)});  // [NT, H]
    if (ibias.index.device() != q.device()) ibias.index = ibias.index.to(q.device());
  }
  Variable sbias = ibias.table.defined() ? Variable() : pos_->score_bias(geo);  // [H, Lq, Lk] or [B, H, Lq, Lk]
  if (sbias.defined()) {
    const int64_t H = cfg_.n_heads;
    RELPOS_CHECK((sbias.dim() == 3 && sbias.size(0) == H && sbias.size(1) == Lq && sbias.size(2) == Lk) ||
                     (sbias.dim() == 4 && sbias.size(0) == B && sbias.size(1) == H && sbias.size(2) == Lq &&
                      sbias.size(3) == Lk),
                 "attention: position encoding '{}' returned a score bias {}, expected [H, Lq, Lk] = [{}, {}, {}] "
                 "or [B, H, Lq, Lk] = [{}, {}, {}, {}]",
                 pos_->type(), shape_str(sbias.shape()), H, Lq, Lk, B, H, Lq, Lk);
    if (alpha_.defined()) sbias = sbias * reshape(alpha_, {alpha_.size(0), 1, 1});
  }
  Tensor kp;  // [B, 1, 1, Lk], 1 = padded key
  if (key_padding.defined()) {
    RELPOS_CHECK(key_padding.dim() == 2 && key_padding.size(0) == B && key_padding.size(1) == Lk,
                 "attention: key padding mask must be [B, Lk] = [{}, {}], got {}", B, Lk,
                 shape_str(key_padding.shape()));
    kp = key_padding.to(q.device()).to(q.dtype()).view({B, 1, 1, Lk});
  }

  // The scores S = scale (q k^T + terms) + bias, masked (causal: a predicate on (i, j);
  // padding: [B, 1, 1, Lk]): [B, H, Lq, Lk].
  auto scores = [&]() {
    constexpr double kNegInf = -std::numeric_limits<double>::infinity();
    Variable s = matmul(q, transpose(k, -1, -2));
    if (terms.defined()) s = s + terms;
    if (scale != 1.0) s = s * scale;
    if (bias.defined()) s = add_toeplitz_bias(s, bias);
    if (sbias.defined()) s = s + sbias;
    if (cfg_.stability.softcap > 0) s = softcap(s, cfg_.stability.softcap);  // stability: c * tanh(S / c)
    if (kp.defined()) s = masked_fill(s, kp, kNegInf);
    if (causal) s = causal_fill(s, q_offset, k_offset, kNegInf);
    return s;
  };
  auto record_stats = [&](const Variable& s, const Variable& p) {  // monitors only, no graph
    NoGradGuard ng;
    Tensor a = k::unary(k::Unary::Abs, s.data());
    if (kp.defined()) a = k::masked_fill(a, kp, 0.0);
    if (causal) a = k::causal_fill(a, q_offset, k_offset, 0.0);
    stats->max_abs_logit = k::reduce(k::Reduce::Max, a, {}, false).item();
    Tensor plogp = k::mul(p.data(), k::unary(k::Unary::Log, k::unary(k::Unary::Clamp, p.data(), 1e-30, 1.0)));
    stats->mean_entropy = -k::reduce(k::Reduce::Sum, plogp, {}, false).item() / double(B * cfg_.n_heads * Lq);
    stats->probs = p.data();
  };

  // Fused path (k::attention: O(L) memory, causal keys skipped, bias gradient fused) whenever
  // the scores are q k^T plus a Toeplitz bias (and bucketed terms or an index bias) and nothing
  // needs P itself.
  if (fusable && !terms.defined() && !sbias.defined() && (!pos_->has_value_terms() || buckets.values.defined())) {
    // Monitors come from the kernel (per-row max |S| and entropy, same pass as the softmax):
    // no [B, H, Lq, Lk] tensor even on logging steps; stats->probs stays undefined.
    k::AttentionArgs args{scale, causal, q_offset, k_offset, /*row_stats=*/stats != nullptr};
    if (dropout_active) {  // the draws dropout_mask would make for P [B, H, Lq, Lk], at the same point
      args.dropout_p = cfg_.dropout;
      args.dropout_seed = gen->state().seed;
      args.dropout_first = gen->advance(uint64_t(B * cfg_.n_heads * Lq * Lk));
    }
    k::AttentionOut fwd;
    const Tensor kp_rows = key_padding.defined() ? key_padding.to(q.device()) : Tensor();  // [B, Lk]
    Variable o;
    if (buckets.keys.defined()) {
      const int64_t nb = buckets.keys.size(0);
      Variable qr = matmul(q, transpose(buckets.keys, 0, 1));  // [B, H, Lq, NB]
      Variable ow = fused_attention_buckets(q, k, v, bias, qr, buckets.bucket, kp_rows, args, &fwd);
      o = narrow(ow, 3, 0, head_dim_);                                                // [B, H, Lq, dh]
      if (buckets.values.defined()) o = o + matmul(narrow(ow, 3, head_dim_, nb), buckets.values);  // value term
    } else if (ibias.table.defined()) {
      o = fused_attention_indexed(q, k, v, bias, ibias.table, ibias.index, kp_rows, args, &fwd);
    } else {
      o = fused_attention(q, k, v, bias, kp_rows, args, &fwd);
    }
    if (stats) {
      stats->max_abs_logit = k::reduce(k::Reduce::Max, fwd.max_abs, {}, false).item();
      stats->mean_entropy = k::reduce(k::Reduce::Sum, fwd.entropy, {}, false).item() / double(B * cfg_.n_heads * Lq);
    }
    return o_proj_->forward(reshape(transpose(o, 1, 2), {B, Lq, cfg_.d_model}));
  }

  Variable s = scores();
  Variable p = softmax(s, -1);
  if (stats) record_stats(s, p);
  p = apply_dropout(p, cfg_.dropout, is_training(), gen);
  Variable o = matmul(p, v);  // [B, H, Lq, dh]
  Variable vt = pos_->value_terms(p, geo);
  if (vt.defined()) o = o + vt;
  o = reshape(transpose(o, 1, 2), {B, Lq, cfg_.d_model});
  return o_proj_->forward(o);
}

}  // namespace relpos::nn
