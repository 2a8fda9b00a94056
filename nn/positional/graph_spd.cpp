// nn/positional/graph_spd.cpp — Graphormer spatial encoding (Ying et al. 2021, "Do
// Transformers Really Perform Bad for Graph Representation?"; reference microsoft/Graphormer
// graphormer/modules/graphormer_layers.py GraphAttnBias, graphormer/data/collator.py).
//   spd[b, i, j] = shortest-path hop count from node i to node j (geometry.position_index,
//                  int64 [B, Lq, Lk] or [Lq, Lk]; -1 = unreachable, see graph_spd.h)
//   row(d) = min(d, max_dist)     for d >= 0      (distances >= max_dist share the last row)
//          = max_dist + 1         for d == -1     (its own learnable "unreachable" row)
//   bias[b, h, i, j] = table[row(spd[b, i, j]), h],  table: [max_dist + 2, H]
// S = q.k / sqrt(d) + alpha * bias (Graphormer adds its bias after q *= d^-0.5), then masks.
// The index is symmetric only if the graph is undirected; it is used as given (no sign).
// Differences from Graphormer, by design:
//  - Graphormer stores spatial_pos = SPD + 1 (0 = padding, padding_idx) in Embedding(512, H),
//    with unreachable = 510; padding here is the attention's key-padding mask instead.
//  - Graphormer's collator masks (-inf) every pair with SPD >= spatial_pos_max (default 20),
//    which includes all unreachable pairs; relpos keeps those pairs attendable: distances
//    >= max_dist (default 20, the collator's spatial_pos_max) share row max_dist, and
//    unreachable pairs learn their own bias.
//  - No virtual graph token (Graphormer's node 0 with graph_token_virtual_distance) and no
//    edge encoding; a pipeline can add a token node to the graph it passes in.
// One table per stack (shared by its layers, as Graphormer computes the bias once).
// Encoder only: causal attention is rejected. Parameters: max_dist (20).
#include "nn/positional/graph_spd.h"

#include <algorithm>
#include <deque>

#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/init.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

Tensor shortest_path_distances(const std::vector<std::vector<std::vector<int64_t>>>& adjacency, int64_t L) {
  const int64_t B = int64_t(adjacency.size());
  RELPOS_CHECK(B > 0 && L > 0, "shortest_path_distances: need at least one example and L > 0 (got {} examples, L {})",
               B, L);
  std::vector<int64_t> out(size_t(B * L * L), kUnreachable);
  for (int64_t b = 0; b < B; ++b) {
    const auto& adj = adjacency[size_t(b)];
    const int64_t n = int64_t(adj.size());
    RELPOS_CHECK(n <= L, "shortest_path_distances: example {} has {} nodes, more than L = {}", b, n, L);
    for (int64_t u = 0; u < n; ++u)
      for (int64_t v : adj[size_t(u)])
        RELPOS_CHECK(v >= 0 && v < n,
                     "shortest_path_distances: example {}, node {} lists neighbour {} (nodes are 0..{})", b, u, v,
                     n - 1);
    int64_t* d = out.data() + b * L * L;
    for (int64_t s = 0; s < n; ++s) {  // BFS from every source
      int64_t* row = d + s * L;
      row[s] = 0;
      std::deque<int64_t> queue{s};
      while (!queue.empty()) {
        const int64_t u = queue.front();
        queue.pop_front();
        for (int64_t v : adj[size_t(u)])
          if (row[v] == kUnreachable) {
            row[v] = row[u] + 1;
            queue.push_back(v);
          }
      }
    }
  }
  return Tensor::from_vector(out, {B, L, L});
}

namespace {
class GraphSPD : public PositionEncoding {
 public:
  GraphSPD(int64_t max_dist, int64_t heads, double std, Generator& gen, DType dt) : max_dist_(max_dist) {
    table_ = register_parameter("table", init::normal({max_dist + 2, heads}, std, gen, dt), group::kPosition);
  }
  std::string type() const override { return "graph_spd"; }

  // Table rows of the spd index: int64, same shape as position_index.
  Tensor bias_index(const AttnGeometry& g) const override {
    const Tensor& t = g.position_index;
    if (!t.defined()) return {};
    RELPOS_CHECK(t.dtype() == DType::I64 && (t.dim() == 2 || t.dim() == 3) && t.size(-2) == g.Lq &&
                     t.size(-1) == g.Lk,
                 "position encoding 'graph_spd': position_index must hold shortest-path distances, int64 "
                 "[B, Lq, Lk] = [B, {}, {}] or [{}, {}], got {}",
                 g.Lq, g.Lk, g.Lq, g.Lk, describe(t));
    // Per-batch data from the data pipeline (not a tensor the model computed): mapped to table
    // rows on the host, like tokenisation, then placed on the index's device. Listed in DESIGN.md.
    std::vector<int64_t> v = t.to_vector<int64_t>();
    for (int64_t& x : v) {
      RELPOS_CHECK(x >= kUnreachable,
                   "position encoding 'graph_spd': shortest-path distance {} is invalid (>= 0, or {} = unreachable)",
                   x, kUnreachable);
      x = x == kUnreachable ? max_dist_ + 1 : std::min(x, max_dist_);
    }
    return Tensor::from_vector(v, t.shape()).to(t.device());
  }

  // The bias as a lookup: table [max_dist + 2, H] gathered at the mapped rows (the base
  // score_bias materialises it for the reference path).
  IndexBias index_bias(const AttnGeometry& g) const override { return {table_, lookup_index(g)}; }

 private:
  // The table rows index_bias reads (and the default score_bias through it): [(B,) Lq, Lk].
  Tensor lookup_index(const AttnGeometry& g) const {
    RELPOS_CHECK(!g.causal, "position encoding 'graph_spd' is encoder-only (graph attention is bidirectional); it "
                            "cannot be used with causal attention");
    RELPOS_CHECK(g.position_index.defined(),
                 "position encoding 'graph_spd' needs shortest-path distances: pass position_index, int64 [B, L, L] "
                 "(Model::forward(tokens, padding, gen, stats, position_index); see "
                 "nn/positional/graph_spd.h shortest_path_distances), got none for Lq {} x Lk {}",
                 g.Lq, g.Lk);
    return bias_index(g);
  }
  int64_t max_dist_;
  Variable table_;
};
}  // namespace

namespace {
PositionEncodingPtr make_graph_spd(const PositionConfig& cfg, Generator& gen) {
  const int64_t md = cfg.params.get_int("max_dist");
  RELPOS_CHECK_CONFIG(md >= 1, "position 'graph_spd': max_dist must be >= 1, got {}", md);
  return std::make_shared<GraphSPD>(md, cfg.n_heads, cfg.init_std, gen, cfg.dtype);
}
}  // namespace

PositionVariant graph_spd_encoding() {
  return {
      .name = "graph_spd",
      .description = "Graphormer spatial bias table[min(spd, max_dist)] from a [B, L, L] distance index (Ying 2021)",
      .params = {param::integer("max_dist", "20", "distances >= max_dist share a row; table [max_dist + 2, H]").rows()},
      .make = make_graph_spd,
      .causal_capable = false,
      .fused_attention = true,
      .facts = {.index_task = "graph",
                .index_bias = true,
                .probe_score_terms = false,
                .no_bias_note = "graph encoding: bias[b, h, i, j] = table[min(spd[b, i, j], max_dist), h] "
                                "(unreachable: row max_dist + 1) needs per-example shortest-path distances "
                                "(position_index [B, L, L]); `relpos bias` has no graph"}};
}

}  // namespace relpos::nn
