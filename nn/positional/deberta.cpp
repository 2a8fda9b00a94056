// nn/positional/deberta.cpp — DeBERTa-v2/v3 disentangled attention (He et al. 2021;
// reference HF transformers models/deberta_v2/modeling_deberta_v2.py: make_log_bucket_position,
// build_relative_position, DisentangledSelfAttention.disentangled_attention_bias,
// DebertaV2Encoder.get_rel_embedding).
//   rel = qi - kj                       (query minus key: DeBERTa's sign, opposite to T5's)
//   bucket(rel), mid = position_buckets / 2, m = max_relative_positions:
//     |rel| <= mid:  rel (exact)
//     otherwise:     sign(rel) * (mid + ceil(log(|rel| / mid) / log((m - 1) / mid) * (mid - 1)))
//   (float32 as in HF; no pre-clamp to +-(m - 1), unlike the original microsoft/DeBERTa code, so
//   rel <= -(m) lands on row 0). position_buckets <= 0: bucket(rel) = rel.
//   idx(i, j) = clamp(bucket(qi - kj) + span, 0, 2 span - 1),  span = position_buckets
//               (or max_relative_positions when position_buckets <= 0)
//   P   = LayerNorm(rel_embeddings)            rel_embeddings: [2 span, D], LayerNorm over D
//   K_r = key projection of P, Q_r = query projection of P  -> [H, 2 span, dh]
//   c2p[b,h,i,j] = q_i . K_r[h, idx(i, j)]     (content -> position)
//   p2c[b,h,i,j] = k_j . Q_r[h, idx(i, j)]     (position -> content)
//   S = (q.k + c2p + p2c) / sqrt(dh * (1 + number of position terms))    (score_scale)
// Projections (share_att_key): with share_att_key=true (default; the v3 reference config) K_r
// and Q_r use the attention layer's own k_proj / q_proj, weights and biases, as HF does: the
// layer passes them in AttnGeometry::q_proj / k_proj. With share_att_key=false the encoding owns
// pos_key_proj / pos_query_proj (Linear D -> D with bias). Difference from HF: HF keeps those in
// each layer's attention; relpos keeps them in the encoding, so they are shared across layers
// whenever the encoding is (position_shared, the default for every type but shaw).
// Sharing: rel_embeddings + LayerNorm are one per stack when the stack shares the encoding (the
// default), like HF's encoder-global DebertaV2Encoder.rel_embeddings / LayerNorm.
// p2c index: HF computes p2c with r_pos = build_relative_position(Lk, Lk), a gather with
// clamp(-r_pos + span) and a transpose. Because bucket() is odd (bucket(-r) = -bucket(r)), the
// p2c row for (i, j) is the c2p index idx(i, j), which relpos uses directly. For Lq != Lk HF's
// [Lk, Lk] p2c cannot be added to the [Lq, Lk] scores (microsoft/DeBERTa#33: fails when the
// query is longer or shorter than the key); relpos uses absolute positions qi = q_offset + i,
// kj = k_offset + j for both terms, so cross-attention and KV-cache decoding are exact (with
// zero offsets it is HF's top-left alignment, and equals HF whenever Lq == Lk).
// Efficiency: only the contiguous range of table rows that idx touches is normalised and
// projected ([n, D] with n <= Lq + Lk - 1), then gathered; the rows left out get zero gradient
// either way. No [Lq, Lk, dh] tensor is built.
// Not modelled: HF's pos_dropout on the relative embeddings (attention dropout still applies).
// The reference is an encoder; relpos also allows causal attention (masks after the terms).
// Parameters: position_buckets (256), max_relative_positions (512; HF's -1 means
// max_position_embeddings = 512), pos_att_type ("c2p|p2c", or "c2p", "p2c"), share_att_key
// (true), norm_rel_ebd ("layer_norm" or "none"), layer_norm_eps (1e-7, DeBERTa's).
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/positional/deberta_bucket.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

int64_t deberta_log_bucket(int64_t rel, int64_t bucket_size, int64_t max_position) {
  if (bucket_size <= 0 || max_position <= 0) return rel;
  const int64_t mid = bucket_size / 2;
  const int64_t abs_pos = (rel < mid && rel > -mid) ? mid - 1 : (rel < 0 ? -rel : rel);
  if (abs_pos <= mid) return rel;
  const float denom = std::log(float(double(max_position - 1) / double(mid)));
  const float log_pos = std::ceil(std::log(float(abs_pos) / float(mid)) / denom * float(mid - 1)) + float(mid);
  return (rel < 0 ? -1 : 1) * int64_t(log_pos);
}

namespace {
class Deberta : public PositionEncoding {
 public:
  Deberta(const PositionConfig& cfg, int64_t buckets, int64_t max_rel, bool c2p, bool p2c, bool share, bool ln,
          double eps, Generator& gen)
      : buckets_(buckets), max_rel_(max_rel), span_(buckets > 0 ? buckets : max_rel), c2p_(c2p), p2c_(p2c),
        share_(share), ln_(ln), eps_(eps), heads_(cfg.n_heads), head_dim_(cfg.head_dim) {
    const int64_t D = cfg.d_model;
    RELPOS_CHECK(heads_ * head_dim_ == D, "position 'deberta': n_heads {} x head_dim {} must equal d_model {}",
                 heads_, head_dim_, D);
    rel_ = register_parameter("rel_embeddings", init::normal({2 * span_, D}, cfg.init_std, gen, cfg.dtype),
                              group::kPosition);
    if (ln_) {
      norm_w_ = register_parameter("norm_weight", init::ones({D}, cfg.dtype), group::kPosition);
      norm_b_ = register_parameter("norm_bias", init::zeros({D}, cfg.dtype), group::kPosition);
    }
    if (!share_) {
      if (c2p_) pos_key_ = register_module("pos_key_proj", std::make_shared<Linear>(D, D, true, gen, cfg.dtype));
      if (p2c_) pos_query_ = register_module("pos_query_proj", std::make_shared<Linear>(D, D, true, gen, cfg.dtype));
    }
  }
  std::string type() const override { return "deberta"; }
  double score_scale(int64_t head_dim) const override {
    return 1.0 / std::sqrt(double(head_dim) * double(1 + int(c2p_) + int(p2c_)));
  }

  Tensor bias_index(const AttnGeometry& g) const override {  // [Lq, Lk], rows of rel_embeddings
    return Tensor::from_vector(index_vector(g), {g.Lq, g.Lk});
  }

  // q: [B, H, Lq, dh], k: [B, H, Lk, dh] -> [B, H, Lq, Lk]
  Variable score_terms(const Variable& q, const Variable& k, const AttnGeometry& g) const override {
    // The rows lo..lo+n-1 of rel_embeddings this geometry touches, and the index into them
    // (local [Lq, Lk], local_t [Lk, Lq]), built once per geometry on the host.
    const GeometryIndex& gi = geometry_index(g);
    const int64_t lo = gi.lo, n = gi.n;
    Variable p = narrow(rel_, 0, lo, n);  // [n, D]
    if (ln_) p = layer_norm(p, norm_w_, norm_b_, eps_);
    const int64_t B = q.size(0);
    Variable out;
    if (c2p_) {
      Variable kr = heads(share_ ? project(g.k_proj, "k_proj", p) : pos_key_->forward(p), n);  // [H, n, dh]
      Variable c2p = matmul(q, transpose(kr, -1, -2));                                         // [B, H, Lq, n]
      out = gather(c2p, -1, gi.local.to(q.data().device()).expand({B, heads_, g.Lq, g.Lk}));
    }
    if (p2c_) {
      Variable qr = heads(share_ ? project(g.q_proj, "q_proj", p) : pos_query_->forward(p), n);  // [H, n, dh]
      Variable p2c = matmul(k, transpose(qr, -1, -2));                                           // [B, H, Lk, n]
      Variable t = gather(p2c, -1, gi.local_t.to(q.data().device()).expand({B, heads_, g.Lk, g.Lq}));
      t = transpose(t, -1, -2);  // [B, H, Lq, Lk]
      out = out.defined() ? out + t : t;
    }
    return out;
  }

 private:
  struct GeometryIndex {
    int64_t lo, n;
    Tensor local, local_t;  // int64 [Lq, Lk] and [Lk, Lq] on this module's device
  };
  // Bounded like PositionEncoding::cached; cleared by to().
  const GeometryIndex& geometry_index(const AttnGeometry& g) const {
    const std::vector<int64_t> key{g.Lq, g.Lk, g.q_offset, g.k_offset};
    auto it = index_cache_.find(key);
    if (it != index_cache_.end()) return it->second;
    if (index_cache_.size() >= 256) index_cache_.clear();
    std::vector<int64_t> idx = index_vector(g);
    const auto [lo_it, hi_it] = std::minmax_element(idx.begin(), idx.end());
    const int64_t lo = *lo_it, n = *hi_it - lo + 1;
    std::vector<int64_t> local(idx.size()), local_t(idx.size());  // rows lo.. -> 0..
    for (int64_t i = 0; i < g.Lq; ++i)
      for (int64_t j = 0; j < g.Lk; ++j) {
        local[size_t(i * g.Lk + j)] = idx[size_t(i * g.Lk + j)] - lo;
        local_t[size_t(j * g.Lq + i)] = idx[size_t(i * g.Lk + j)] - lo;
      }
    GeometryIndex gi{lo, n, Tensor::from_vector(local, {g.Lq, g.Lk}).to(device()),
                     Tensor::from_vector(local_t, {g.Lk, g.Lq}).to(device())};
    return index_cache_.emplace(key, std::move(gi)).first->second;
  }
  void on_device_change() override {
    PositionEncoding::on_device_change();
    index_cache_.clear();
  }
  mutable std::map<std::vector<int64_t>, GeometryIndex> index_cache_;

  std::vector<int64_t> index_vector(const AttnGeometry& g) const {
    std::vector<int64_t> idx(size_t(g.Lq * g.Lk));
    for (int64_t i = 0; i < g.Lq; ++i)
      for (int64_t j = 0; j < g.Lk; ++j) {
        const int64_t b = deberta_log_bucket((g.q_offset + i) - (g.k_offset + j), buckets_, max_rel_);
        idx[size_t(i * g.Lk + j)] = std::clamp(b + span_, int64_t(0), 2 * span_ - 1);
      }
    return idx;
  }
  static Variable project(const std::function<Variable(const Variable&)>& f, const char* what, const Variable& p) {
    RELPOS_CHECK(bool(f),
                 "position encoding 'deberta' (share_att_key=true) needs the attention layer's {} in the geometry; "
                 "use it inside MultiHeadAttention or set share_att_key=false",
                 what);
    return f(p);
  }
  Variable heads(const Variable& x, int64_t n) const {  // [n, D] -> [H, n, dh]
    return transpose(reshape(x, {n, heads_, head_dim_}), 0, 1);
  }
  int64_t buckets_, max_rel_, span_;
  bool c2p_, p2c_, share_, ln_;
  double eps_;
  int64_t heads_, head_dim_;
  Variable rel_, norm_w_, norm_b_;
  std::shared_ptr<Linear> pos_key_, pos_query_;
};
}  // namespace

namespace {
PositionEncodingPtr make_deberta(const PositionConfig& cfg, Generator& gen) {
  const auto& p = cfg.params;
  const int64_t buckets = p.get_int("position_buckets"), max_rel = p.get_int("max_relative_positions");
  RELPOS_CHECK_CONFIG(max_rel >= 1, "position 'deberta': max_relative_positions must be >= 1, got {}", max_rel);
  RELPOS_CHECK_CONFIG(buckets <= 0 || (buckets >= 2 && buckets % 2 == 0 && max_rel - 1 > buckets / 2),
                      "position 'deberta': position_buckets ({}) must be an even number >= 2 with "
                      "max_relative_positions - 1 ({}) > position_buckets / 2, or <= 0 for no bucketing",
                      buckets, max_rel - 1);
  const std::string att = p.get_choice("pos_att_type");
  const bool c2p = att.find("c2p") != std::string::npos, p2c = att.find("p2c") != std::string::npos;
  const bool ln = p.get_choice("norm_rel_ebd") == "layer_norm";
  const double eps = p.get_double("layer_norm_eps");
  RELPOS_CHECK_CONFIG(eps > 0, "position 'deberta': layer_norm_eps must be positive, got {}", eps);
  return std::make_shared<Deberta>(cfg, buckets, max_rel, c2p, p2c, p.get_bool("share_att_key"), ln, eps, gen);
}
}  // namespace

PositionVariant deberta_encoding() {
  return {.name = "deberta",
          .description = "DeBERTa-v2 disentangled c2p + p2c terms, log buckets, shared LayerNorm'd table (He 2021)",
          .params =
              {param::integer("position_buckets", "256", "log buckets (<= 0: no bucketing); table [2 span, D]").rows(),
               param::integer("max_relative_positions", "512", "span without buckets, and the log-bucket range"),
               param::choice("pos_att_type", {"c2p|p2c", "p2c|c2p", "c2p", "p2c"}, "c2p|p2c",
                             "which disentangled terms are added"),
               param::flag("share_att_key", "true",
                           "project positions with the layer's q_proj / k_proj (else own projections)"),
               param::choice("norm_rel_ebd", {"layer_norm", "none"}, "layer_norm", "LayerNorm the relative embeddings"),
               param::real("layer_norm_eps", "1e-7", "epsilon of that LayerNorm")},
          .make = make_deberta,
          // log buckets at |rel| > 2 within the gradchecks' lengths
          .facts = {.probe_score_terms = false,
                    .gradcheck_params = {{"position_buckets", "4"}, {"max_relative_positions", "8"}}}};
}

}  // namespace relpos::nn
