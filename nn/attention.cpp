#include "nn/attention.h"

#include <cmath>
#include <limits>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/layers.h"

namespace relpos::nn {

namespace {
bool g_fused_attention = true;
}  // namespace
void set_fused_attention(bool on) { g_fused_attention = on; }
bool fused_attention_enabled() { return g_fused_attention; }
bool fused_attention_possible(bool fused_config, double softcap, Device device) {
  return fused_config && g_fused_attention && !(softcap > 0) && k::supports(device, k::Op::attention, DType::F32);
}

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
  if (cfg.stability.qk_norm != QkNorm::None) {
    const NormType type = cfg.stability.qk_norm == QkNorm::LayerNorm ? NormType::LayerNorm : NormType::RMSNorm;
    q_norm_ = register_module("q_norm", std::make_shared<Norm>(type, head_dim_, dtype));
    k_norm_ = register_module("k_norm", std::make_shared<Norm>(type, head_dim_, dtype));
  }
}

Variable MultiHeadAttention::split_heads(const Variable& x) const {
  return transpose(reshape(x, {x.size(0), x.size(1), cfg_.n_heads, head_dim_}), 1, 2);
}

struct MultiHeadAttention::Heads {
  Variable q, k, v;  // [B, H, Lq, dh], [B, H, Lk, dh] (with the cache's), rotated
  int64_t B = 0, Lq = 0, Lk = 0;
  AttnGeometry geo;
};

struct MultiHeadAttention::Positions {
  PositionEncoding::Buckets buckets;  // bucketed content terms (Shaw), fused path only
  Variable terms;                     // content-position score terms [B, H, Lq, Lk] or none
  double scale = 1.0;
  Variable bias;                      // Toeplitz bias [H, Lq + Lk - 1] (times alpha) or none
  PositionEncoding::IndexBias ibias;  // table-lookup bias, fused path only (times alpha)
  Variable sbias;                     // [H, Lq, Lk] or [B, H, Lq, Lk] (times alpha) or none
  // Channel distances (model.position.distance): the value term sum_j P_ij values[rows[b, i, j]]
  // replaces the encoding's value_terms (rows int64 [B, H, Lq, Lk], values [NB, dh]).
  Tensor rows;
  Variable row_values;
};

// q, k, v from the projections: qk_norm, rotation at the absolute positions, the KV cache.
MultiHeadAttention::Heads MultiHeadAttention::project(const AttentionInput& in, KVCache* cache) const {
  Heads h;
  h.B = in.xq.size(0);
  h.Lq = in.xq.size(1);
  int64_t k_offset = in.k_offset;
  h.q = split_heads(q_proj_->forward(in.xq));                             // [B, H, Lq, dh]
  h.k = split_heads(k_proj_->forward(in.xkv));                            // [B, H, Lk_new, dh]
  if (q_norm_) h.q = q_norm_->forward(h.q), h.k = k_norm_->forward(h.k);  // stability: qk_norm
  h.q = pos_->rotate(h.q, in.q_offset);
  h.k = pos_->rotate_key(h.k, k_offset);
  h.v = split_heads(v_proj_->forward(in.xkv));
  if (cache) {
    RELPOS_CHECK(k_offset == cache->length(), "attention: KV cache holds {} positions but k_offset is {}",
                 cache->length(), k_offset);
    if (cache->length() > 0) {
      h.k = cat({cache->k, h.k}, 2);
      h.v = cat({cache->v, h.v}, 2);
      k_offset = 0;
    }
    cache->k = h.k;
    cache->v = h.v;
  }
  h.Lk = h.k.size(2);
  h.geo = AttnGeometry{h.Lq, h.Lk, in.q_offset, k_offset, in.causal, in.position_index};
  h.geo.positions = in.positions;
  if (in.positions.defined()) h.geo.key_padding = in.key_padding;  // the same tokens' padding (grids)
  h.geo.q_proj = [this](const Variable& x) { return q_proj_->forward(x); };
  h.geo.k_proj = [this](const Variable& x) { return k_proj_->forward(x); };
  return h;
}

// The encoding's contributions, with alpha applied and their shapes checked. A table-lookup
// bias goes to the fused kernel as table + index (no [H, Lq, Lk]); score_bias materialises the
// same bias for the reference path.
MultiHeadAttention::Positions MultiHeadAttention::position_terms(const Heads& h, bool fusable) const {
  if (pos_->distance_column() >= 0) return channel_position_terms(h, fusable);
  const int64_t B = h.B, H = cfg_.n_heads, Lq = h.Lq, Lk = h.Lk;
  Positions p;
  if (fusable) p.buckets = pos_->bucketed_terms(h.geo);
  if (!p.buckets.keys.defined()) p.terms = pos_->score_terms(h.q, h.k, h.geo);
  p.scale = pos_->score_scale(head_dim_);
  p.bias = pos_->toeplitz_bias(h.geo);
  if (p.bias.defined() && alpha_.defined()) p.bias = p.bias * alpha_;
  const bool fuse_index = fusable && !p.buckets.keys.defined() && !p.terms.defined() && !pos_->has_value_terms();
  if (fuse_index) p.ibias = pos_->index_bias(h.geo);
  if (p.ibias.table.defined()) {
    const Tensor& ix = p.ibias.index;
    RELPOS_CHECK(p.ibias.table.dim() == 2 && p.ibias.table.size(1) == H && ix.defined() && ix.dtype() == DType::I64 &&
                     ((ix.dim() == 2 && ix.size(0) == Lq && ix.size(1) == Lk) ||
                      (ix.dim() == 3 && ix.size(0) == B && ix.size(1) == Lq && ix.size(2) == Lk)),
                 "attention: position encoding '{}' returned an index bias with table {} and index {} for a score "
                 "bias [B, H, Lq, Lk] = [{}, {}, {}, {}]; expected table [NT, H] = [NT, {}] and index int64 "
                 "[Lq, Lk] = [{}, {}] or [B, Lq, Lk] = [{}, {}, {}]",
                 pos_->type(), shape_str(p.ibias.table.shape()), describe(ix), B, H, Lq, Lk, H, Lq, Lk, B, Lq, Lk);
    if (alpha_.defined()) p.ibias.table = p.ibias.table * reshape(alpha_, {1, alpha_.size(0)});  // [NT, H]
    if (p.ibias.index.device() != h.q.device()) p.ibias.index = p.ibias.index.to(h.q.device());
    return p;
  }
  p.sbias = pos_->score_bias(h.geo);
  if (p.sbias.defined()) {
    const Variable& s = p.sbias;
    RELPOS_CHECK((s.dim() == 3 && s.size(0) == H && s.size(1) == Lq && s.size(2) == Lk) ||
                     (s.dim() == 4 && s.size(0) == B && s.size(1) == H && s.size(2) == Lq && s.size(3) == Lk),
                 "attention: position encoding '{}' returned a score bias {}, expected [H, Lq, Lk] = [{}, {}, {}] "
                 "or [B, H, Lq, Lk] = [{}, {}, {}, {}]",
                 pos_->type(), shape_str(s.shape()), H, Lq, Lk, B, H, Lq, Lk);
    if (alpha_.defined()) p.sbias = p.sbias * reshape(alpha_, {alpha_.size(0), 1, 1});
  }
  return p;
}

// The distance-indexed encoding's terms with kj - qi from a position channel
// (channel_distance_terms): its bias as a per-example table lookup (the fused kernel's index
// bias, or materialised), its content terms gathered from q . keys by each (b, i, j)'s row.
MultiHeadAttention::Positions MultiHeadAttention::channel_position_terms(const Heads& h, bool fusable) const {
  const int64_t B = h.B, H = cfg_.n_heads, Lq = h.Lq, Lk = h.Lk;
  Positions p;
  p.scale = pos_->score_scale(head_dim_);
  ChannelDistanceTerms t = channel_distance_terms(*pos_, h.geo);
  if (t.keys.defined()) {
    p.rows = t.rows.to(h.q.device()).view({B, 1, Lq, Lk}).expand({B, H, Lq, Lk});
    const Variable kt = t.keys.dim() == 2 ? transpose(t.keys, 0, 1) : unsqueeze(transpose(t.keys, 1, 2), 0);
    p.terms = gather(matmul(h.q, kt), -1, p.rows);  // q_i . keys[row(i, j)]: [B, H, Lq, Lk]
    p.row_values = t.values;
  }
  if (t.bias.table.defined()) {
    if (alpha_.defined()) t.bias.table = t.bias.table * reshape(alpha_, {1, alpha_.size(0)});  // [R, H]
    if (t.bias.index.device() != h.q.device()) t.bias.index = t.bias.index.to(h.q.device());
    if (fusable && !p.terms.defined())
      p.ibias = t.bias;
    else
      p.sbias = permute(embedding(t.bias.table, t.bias.index), {0, 3, 1, 2});  // [B, H, Lq, Lk]
  }
  return p;
}

// The one place that decides: the fused kernel (O(L) memory, causal keys skipped, bias
// gradient fused) whenever the scores are q k^T plus a Toeplitz bias (and bucketed terms or an
// index bias), no softcap applies and nothing needs P itself.
bool MultiHeadAttention::use_fused(const Positions& p, bool fusable) const {
  return fusable && !p.terms.defined() && !p.sbias.defined() &&
         (!pos_->has_value_terms() || p.buckets.values.defined());
}

Variable MultiHeadAttention::forward(const AttentionInput& in, const AttentionSinks& sinks) const {
  RELPOS_CHECK(in.xq.dim() == 3 && in.xkv.dim() == 3 && in.xq.size(-1) == cfg_.d_model &&
                   in.xkv.size(-1) == cfg_.d_model && in.xq.size(0) == in.xkv.size(0),
               "attention: expected [B, Lq, {0}] and [B, Lk, {0}], got {1} and {2}", cfg_.d_model,
               shape_str(in.xq.shape()), shape_str(in.xkv.shape()));
  RELPOS_CHECK(!(pos_->causal_only() && !in.causal), "position encoding '{}' only works with causal attention",
               pos_->type());
  const Heads h = project(in, sinks.cache);
  const bool fusable = cfg_.fused && fused_attention_enabled() &&
                       k::supports(h.q.device(), k::Op::attention, h.q.dtype()) && !(cfg_.stability.softcap > 0);
  const Positions p = position_terms(h, fusable);
  Tensor kp;  // [B, 1, 1, Lk], 1 = padded key
  if (in.key_padding.defined()) {
    RELPOS_CHECK(in.key_padding.dim() == 2 && in.key_padding.size(0) == h.B && in.key_padding.size(1) == h.Lk,
                 "attention: key padding mask must be [B, Lk] = [{}, {}], got {}", h.B, h.Lk,
                 shape_str(in.key_padding.shape()));
    kp = in.key_padding.to(h.q.device()).to(h.q.dtype()).view({h.B, 1, 1, h.Lk});
  }
  const Variable o = use_fused(p, fusable) ? fused(h, p, in, sinks) : reference(h, p, kp, sinks);  // [B, H, Lq, dh]
  return o_proj_->forward(reshape(transpose(o, 1, 2), {h.B, h.Lq, cfg_.d_model}), in.residual);
}

// k::attention, with dropout on P drawn inside it (the draws dropout_mask would make for P
// [B, H, Lq, Lk], at the same point of the stream). Monitors come from the kernel (per-row
// max |S| and entropy, same pass as the softmax): no [B, H, Lq, Lk] tensor even on logging
// steps; stats->probs stays undefined.
Variable MultiHeadAttention::fused(const Heads& h, const Positions& p, const AttentionInput& in,
                                   const AttentionSinks& sinks) const {
  k::AttentionArgs args{p.scale, in.causal, h.geo.q_offset, h.geo.k_offset, /*row_stats=*/sinks.stats != nullptr};
  if (dropout_applies(cfg_.dropout, is_training(), sinks.gen)) {
    args.dropout_p = cfg_.dropout;
    args.dropout_seed = sinks.gen->state().seed;
    args.dropout_first = sinks.gen->advance(uint64_t(h.B * cfg_.n_heads * h.Lq * h.Lk));
  }
  k::AttentionOut fwd;
  const Tensor kp_rows = in.key_padding.defined() ? in.key_padding.to(h.q.device()) : Tensor();  // [B, Lk]
  // Under autocast (train.precision bf16/fp16) the kernel's q, k, v and output take 16-bit
  // values, and so do P and dS where they enter a product; S, the bias, the softmax statistics
  // and the accumulators stay float32 (as FlashAttention keeps them). The kernel rounds them
  // itself (k::AttentionArgs::inputs, probs), and the output too where it is the layer's output
  // (round_output: not with buckets, whose output gains the value term first and is rounded
  // after it).
  if (h.q.dtype() == DType::F32) args.inputs = args.probs = gemm_inputs(autocast_precision());
  args.round_output = !p.buckets.keys.defined();
  const Variable &q = h.q, &kk = h.k, &v = h.v;
  Variable o;
  if (p.buckets.keys.defined()) {
    const int64_t nb = p.buckets.keys.size(0);
    Variable qr = matmul(q, transpose(p.buckets.keys, 0, 1));  // [B, H, Lq, NB]
    Variable ow = fused_attention_buckets(q, kk, v, p.bias, qr, p.buckets.bucket, kp_rows, args, &fwd);
    o = narrow(ow, 3, 0, head_dim_);                                                                 // [B, H, Lq, dh]
    if (p.buckets.values.defined()) o = o + matmul(narrow(ow, 3, head_dim_, nb), p.buckets.values);  // value term
  } else if (p.ibias.table.defined()) {
    o = fused_attention_indexed(q, kk, v, p.bias, p.ibias.table, p.ibias.index, kp_rows, args, &fwd);
  } else {
    o = fused_attention(q, kk, v, p.bias, kp_rows, args, &fwd);
  }
  if (sinks.stats) {
    sinks.stats->max_abs_logit = k::reduce(k::Reduce::Max, fwd.max_abs, {}, false).item();
    sinks.stats->row_max_abs_logit = fwd.max_abs;
    sinks.stats->mean_entropy =
        k::reduce(k::Reduce::Sum, fwd.entropy, {}, false).item() / double(h.B * cfg_.n_heads * h.Lq);
  }
  return p.buckets.keys.defined() ? autocast_round(o) : o;
}

// Everything materialised: S = scale (q k^T + terms) + biases, softcap, masks (padding
// [B, 1, 1, Lk]; causal: a predicate on (i, j)); P = softmax(S); dropout; P v + value terms.
Variable MultiHeadAttention::reference(const Heads& h, const Positions& p, const Tensor& kp,
                                       const AttentionSinks& sinks) const {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const int64_t q_offset = h.geo.q_offset, k_offset = h.geo.k_offset;
  const bool causal = h.geo.causal;
  Variable s = matmul(h.q, transpose(h.k, -1, -2));
  if (p.terms.defined()) s = s + p.terms;
  if (p.scale != 1.0) s = s * p.scale;
  if (p.bias.defined()) s = add_toeplitz_bias(s, p.bias);
  if (p.sbias.defined()) s = s + p.sbias;
  if (cfg_.stability.softcap > 0) s = softcap(s, cfg_.stability.softcap);  // stability: c * tanh(S / c)
  if (kp.defined()) s = masked_fill(s, kp, kNegInf);
  if (causal) s = causal_fill(s, q_offset, k_offset, kNegInf);
  Variable prob = softmax(s, -1);
  if (sinks.stats) {  // monitors only, no graph
    NoGradGuard ng;
    Tensor a = k::unary(k::Unary::Abs, s.data());
    if (kp.defined()) a = k::masked_fill(a, kp, 0.0);
    if (causal) a = k::causal_fill(a, q_offset, k_offset, 0.0);
    sinks.stats->row_max_abs_logit = k::reduce(k::Reduce::Max, a, {-1}, false);
    sinks.stats->max_abs_logit = k::reduce(k::Reduce::Max, sinks.stats->row_max_abs_logit, {}, false).item();
    Tensor plogp = k::mul(prob.data(), k::unary(k::Unary::Log, k::unary(k::Unary::Clamp, prob.data(), 1e-30, 1.0)));
    sinks.stats->mean_entropy = -k::reduce(k::Reduce::Sum, plogp, {}, false).item() / double(h.B * cfg_.n_heads * h.Lq);
    sinks.stats->probs = prob.data();
  }
  prob = apply_dropout(prob, cfg_.dropout, is_training(), sinks.gen);
  Variable o = matmul(prob, h.v);  // [B, H, Lq, dh]
  Variable vt;
  if (!p.rows.defined()) {
    vt = pos_->value_terms(prob, h.geo);
  } else if (p.row_values.defined()) {  // channel distances: P scatter-added into the rows, @ values
    Shape s = prob.shape();
    s.back() = p.row_values.size(0);
    vt = matmul(scatter_add(s, -1, p.rows, prob), p.row_values);
  }
  if (vt.defined()) o = o + vt;
  return o;
}

}  // namespace relpos::nn
