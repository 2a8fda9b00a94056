// nn/positional/shaw.cpp — relative position representations (Shaw et al. 2018; reference
// tensor2tensor _generate_relative_positions_matrix / dot_product_attention_relative).
//   idx[i, j] = clip(kj - qi, -k_max, k_max) + k_max          (key minus query)
//   e_ij = q_i . (k_j + wK[idx[i, j]]) / sqrt(d)               (keys: a score term)
//   z_i  = sum_j P_ij (v_j + wV[idx[i, j]])                    (values: a value term)
// wK, wV: [2 k_max + 1, head_dim], shared by the heads of a layer (one pair per layer).
// Computed without a [Lq, Lk, d] tensor: q @ wK^T -> [.., Lq, 2k+1] then gathered by idx;
// values: P scatter-added into [.., Lq, 2k+1] by idx, then @ wV. The fused kernel takes the
// same terms in bucketed form (bucketed_terms(): wK, wV and the bucket of each distance).
// Positions are absolute (offsets), so queries of a KV-cache step see the right distances.
// Parameters: k_max (16).
#include <algorithm>

#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/init.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

namespace {
class Shaw : public PositionEncoding {
 public:
  Shaw(int64_t k_max, int64_t head_dim, double std, Generator& gen, DType dt) : k_max_(k_max) {
    keys_ = register_parameter("keys", init::normal({2 * k_max + 1, head_dim}, std, gen, dt), group::kPosition);
    values_ = register_parameter("values", init::normal({2 * k_max + 1, head_dim}, std, gen, dt), group::kPosition);
  }
  std::string type() const override { return "shaw"; }

  Tensor bias_index(const AttnGeometry& g) const override {  // [Lq, Lk]
    std::vector<int64_t> idx(size_t(g.Lq * g.Lk));
    for (int64_t i = 0; i < g.Lq; ++i)
      for (int64_t j = 0; j < g.Lk; ++j)
        idx[size_t(i * g.Lk + j)] = std::clamp((g.k_offset + j) - (g.q_offset + i), -k_max_, k_max_) + k_max_;
    return Tensor::from_vector(idx, {g.Lq, g.Lk});
  }

  // q: [B, H, Lq, dh] -> [B, H, Lq, Lk]
  Variable score_terms(const Variable& q, const Variable&, const AttnGeometry& g) const override {
    Variable rel = matmul(q, transpose(keys_, 0, 1));  // [B, H, Lq, 2k+1]
    return gather(rel, -1, expanded_index(q, g));
  }

  // bucket[t] for distance kj - qi = (k_offset - q_offset) + t - (Lq - 1): [Lq + Lk - 1]
  Buckets bucketed_terms(const AttnGeometry& g) const override {
    Tensor bucket = geometry_cached("shaw.bucket", g, [&] {
      std::vector<int64_t> idx(size_t(g.Lq + g.Lk - 1));
      for (int64_t t = 0; t < g.Lq + g.Lk - 1; ++t)
        idx[size_t(t)] = std::clamp((g.k_offset - g.q_offset) + t - (g.Lq - 1), -k_max_, k_max_) + k_max_;
      return Tensor::from_vector(idx, {g.Lq + g.Lk - 1});
    });
    return {keys_, values_, bucket};
  }

  bool has_value_terms() const override { return true; }
  // p: [B, H, Lq, Lk] -> [B, H, Lq, dh]
  Variable value_terms(const Variable& p, const AttnGeometry& g) const override {
    Shape s = p.shape();
    s.back() = 2 * k_max_ + 1;
    Variable w = scatter_add(s, -1, expanded_index(p, g), p);  // [B, H, Lq, 2k+1]
    return matmul(w, values_);
  }

 private:
  Tensor expanded_index(const Variable& like, const AttnGeometry& g) const {
    return geometry_cached("shaw.index", g, [&] { return bias_index(g); })
        .expand({like.size(0), like.size(1), g.Lq, g.Lk});
  }
  int64_t k_max_;
  Variable keys_, values_;
};
}  // namespace

namespace {
PositionEncodingPtr make_shaw(const PositionConfig& cfg, Generator& gen) {
  int64_t k = cfg.params.get_int("k_max");
  RELPOS_CHECK_CONFIG(k >= 1, "position 'shaw': k_max must be >= 1, got {}", k);
  return std::make_shared<Shaw>(k, cfg.head_dim, cfg.init_std, gen, cfg.dtype);
}
}  // namespace

PositionVariant shaw_encoding() {
  return {.name = "shaw",
          .description = "relative key and value embeddings clipped at k_max (Shaw 2018)",
          .params = {param::integer("k_max", "16",
                                    "distances are clipped to [-k_max, k_max]; tables [2 k_max + 1, head_dim]")
                         .rows()},
          .make = make_shaw,
          .per_layer = true,
          .fused_attention = true,
          .facts = {.distance_indexed = true}};
}

}  // namespace relpos::nn
