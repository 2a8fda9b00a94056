// nn/positional/music_transformer.cpp — Music Transformer relative attention (Huang et al. 2018;
// reference tensor2tensor common_attention.py: get_relative_embeddings_left(_right),
// dot_product_self_attention_relative_v2 and its unmasked form,
// _relative_position_to_absolute_position_(un)masked).
//   S[h,i,j] += q_i . E[h, M - 1 + d],  d = kj - qi                 (a score term, before scaling)
// E: [H, 2M - 1, head_dim] per layer (M = max_relative_position; [1, 2M - 1, head_dim] when the
// heads share it). Row M - 1 + d holds distance d for |d| <= M - 1; distances beyond get a zero
// embedding (t2t pads the table with zeros; unlike Shaw's clipping). A causal layer only reads
// d <= 0, t2t's masked table [H, M, d]; the rows d > 0 then get no gradient.
// Computed with the skewing trick, no [Lq, Lk, d] tensor and no gather index:
//   rel = q @ E_t^T        [B, H, Lq, Lq + Lk - 1]  column t <-> distance d_min + t (E_t: the rows of
//                                                     the Toeplitz distances of this geometry)
//   skew: pad one zero column, flatten, keep Lq (Lq + Lk - 1) entries, reshape
//         [Lq, Lq + Lk - 1] and keep columns Lq - 1 .. Lq + Lk - 2:  S[i, j] = rel[i, j - i + Lq - 1]
// (row i of the padded [Lq, Lq + Lk] matrix starts at i (Lq + Lk), which the reshape to width
// Lq + Lk - 1 shifts left by i). Any Lq, Lk and offsets (KV-cache decoding, memory), not only
// t2t's square self-attention. Keys only (t2t's optional relative values are not implemented).
// Parameters: max_relative_position (model.max_len), heads_share (false).
#include <algorithm>

#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/init.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

namespace {
class MusicTransformer : public PositionEncoding {
 public:
  MusicTransformer(int64_t max_rel, int64_t table_heads, int64_t head_dim, double std, Generator& gen, DType dt)
      : max_rel_(max_rel) {
    table_ = register_parameter("table", init::normal({table_heads, 2 * max_rel - 1, head_dim}, std, gen, dt),
                                group::kPosition);
  }
  std::string type() const override { return "music_transformer"; }

  // The table row of each Toeplitz distance d_min + t, or 2M - 1 (the appended zero row) for
  // |d| >= M: int64 [Lq + Lk - 1].
  Tensor bias_rows(const AttnGeometry& g) const {
    return geometry_cached("music.rows", g, [&] {
      std::vector<int64_t> d = toeplitz_distances(g).to_vector<int64_t>();
      for (auto& x : d) x = (x > -max_rel_ && x < max_rel_) ? x + max_rel_ - 1 : 2 * max_rel_ - 1;
      return Tensor::from_vector(d, {int64_t(d.size())});
    });
  }

  // For inspection: the table row each (i, j) reads ([Lq, Lk]; 2M - 1: the zero row).
  Tensor bias_index(const AttnGeometry& g) const override {
    const auto rows = bias_rows(g).to(Device::CPU).to_vector<int64_t>();
    std::vector<int64_t> idx(size_t(g.Lq * g.Lk));
    for (int64_t i = 0; i < g.Lq; ++i)
      for (int64_t j = 0; j < g.Lk; ++j) idx[size_t(i * g.Lk + j)] = rows[size_t(j - i + g.Lq - 1)];
    return Tensor::from_vector(idx, {g.Lq, g.Lk});
  }

  // The same score term as table rows (the channel-distance path): keys [th, 2M, dh], the
  // table with its zero row appended, and the row of each Toeplitz distance. No value term.
  Buckets distance_rows(const AttnGeometry& g) const override {
    Variable zero_row(
        Tensor::zeros({table_.size(0), 1, table_.size(2)}, table_.data().dtype(), table_.data().device()));
    return {cat({table_, zero_row}, 1), Variable(), bias_rows(g)};
  }

  // q: [B, H, Lq, dh] -> [B, H, Lq, Lk]
  Variable score_terms(const Variable& q, const Variable&, const AttnGeometry& g) const override {
    const int64_t B = q.size(0), H = q.size(1), Lq = g.Lq, Lk = g.Lk, n = Lq + Lk - 1;
    const int64_t th = table_.size(0), dh = table_.size(2);
    Variable zero_row(Tensor::zeros({th, 1, dh}, table_.data().dtype(), table_.data().device()));
    Variable rows = index_select(cat({table_, zero_row}, 1), 1, bias_rows(g));  // [th, n, dh]
    Variable rel = matmul(q, unsqueeze(transpose(rows, 1, 2), 0));               // [B, H, Lq, n]
    // the skew: S[i, j] = rel[i, j - i + Lq - 1]
    Variable pad(Tensor::zeros({B, H, Lq, 1}, rel.data().dtype(), rel.data().device()));
    Variable flat = reshape(cat({rel, pad}, 3), {B, H, Lq * (n + 1)});
    Variable sheared = reshape(narrow(flat, 2, 0, Lq * n), {B, H, Lq, n});
    return narrow(sheared, 3, Lq - 1, Lk);
  }

 private:
  int64_t max_rel_;
  Variable table_;
};

PositionEncodingPtr make_music_transformer(const PositionConfig& cfg, Generator& gen) {
  const int64_t m = cfg.params.get_int("max_relative_position", cfg.max_len);
  RELPOS_CHECK_CONFIG(m >= 1, "position 'music_transformer': max_relative_position must be >= 1, got {}", m);
  const int64_t heads = cfg.params.get_bool("heads_share") ? 1 : cfg.n_heads;
  return std::make_shared<MusicTransformer>(m, heads, cfg.head_dim, cfg.init_std, gen, cfg.dtype);
}
}  // namespace

PositionVariant music_transformer_encoding() {
  return {.name = "music_transformer",
          .description =
              "Music Transformer relative keys q.E[kj-qi] per head, skewing trick, zero beyond "
              "max_relative_position (Huang 2018)",
          .params = {param::integer("max_relative_position", Computed{"model.max_len"},
                                    "M: distances |kj - qi| < M have a row; table [H, 2M - 1, head_dim]")
                         .rows(),
                     param::flag("heads_share", "false", "one table for all heads ([1, 2M - 1, head_dim])")},
          .make = make_music_transformer,
          .per_layer = true,
          .facts = {.probe_score_terms = false, .distance_indexed = true}};
}

}  // namespace relpos::nn
