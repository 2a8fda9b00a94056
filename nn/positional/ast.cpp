// nn/positional/ast.cpp — tree-relative attention bias over a program's syntax tree, in the
// style of the Code Transformer (Zügner et al. 2021, "Language-Agnostic Representation
// Learning of Source Code from Structure and Context": relative distances between AST nodes)
// and TPTrans (Peng et al. 2021, "Integrating Tree Path in Transformer for Code
// Representation": the path between two tokens' nodes as up and down steps).
//   Each token carries its node's parent (token channel "parent": tokens
//   back to the parent's token, 0 = a root; nn/positional/ast_tree.h). Per window, for query
//   token i and key token j with lowest common ancestor a (ast_tree_steps):
//     up = wd(i) - wd(a),  down = wd(j) - wd(a),  path = up + down
//   u = min(up, max_steps), d = min(down, max_steps), s = min(path, max_path)
//   bias[b, h, i, j] = updown[u (max_steps + 1) + d, h] + path[s, h]
//                    (+ seq[t5_bucket(kj - qi), h] when seq_buckets > 0: a T5 bucketed
//                       sequential bias beside the tree one, the "both" configuration)
//   tables: updown [(max_steps + 1)^2, H], path [max_path + 1, H], seq [seq_buckets, H].
// S = scale q.k + alpha * bias, then masks. The tree bias is an index bias: the table
// [(max_steps + 1)^2 (max_path + 1), H] holds updown[u, d] + path[s] for every (u, d, s)
// (built from the parameters each forward, so gradients reach both tables), gathered at
// index[b, i, j] = (u (max_steps + 1) + d) (max_path + 1) + s; the sequential part is a
// Toeplitz bias. Both go to the fused kernel (model.attention: fused).
// Causal attention: a token's ancestors are earlier tokens, so query i relates to key j <= i
// from the parents of tokens <= i alone (keys after i get index 0 and are masked).
// The relations are computed once per batch on the host (data-pipeline input, like
// graph_spd's distances) and reused by the stack's layers (one instance per stack).
// Generated tokens have no tree: KV-cache decoding (q_offset > 0 past the window's channels)
// is refused, so `relpos sample` refuses a model with this encoding.
// Init: normal(init_std) for every table, as every relpos table.
// Parameters: max_steps (8), max_path (16), seq_buckets (0),
// seq_max_distance (128).
#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/init.h"
#include "nn/positional/ast_tree.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"
#include "nn/positional/t5_bucket.h"

namespace relpos::nn {

namespace {
class AstBias : public PositionEncoding {
 public:
  AstBias(std::string channel, int64_t column, int64_t max_steps, int64_t max_path, int64_t seq_buckets,
          int64_t seq_max_distance, int64_t heads, double std, Generator& gen, DType dt)
      : channel_(std::move(channel)),
        column_(column),
        k_(max_steps),
        s_(max_path),
        nb_(seq_buckets),
        md_(seq_max_distance) {
    updown_ = register_parameter("updown", init::normal({(k_ + 1) * (k_ + 1), heads}, std, gen, dt), group::kPosition);
    path_ = register_parameter("path", init::normal({s_ + 1, heads}, std, gen, dt), group::kPosition);
    if (nb_ > 0) seq_ = register_parameter("seq", init::normal({nb_, heads}, std, gen, dt), group::kPosition);
  }
  std::string type() const override { return "ast"; }

  // The sequential part ("both"): T5 buckets of kj - qi (unidirectional when causal).
  Variable toeplitz_bias(const AttnGeometry& g) const override {
    if (nb_ == 0) return {};
    Tensor buckets = geometry_cached("ast.seq_buckets", g, [&] {
      std::vector<int64_t> d = toeplitz_distances(g).to_vector<int64_t>();
      for (auto& x : d) x = t5_bucket(x, !g.causal, nb_, md_);
      return Tensor::from_vector(d, {int64_t(d.size())});
    });
    return transpose(embedding(seq_, buckets), 0, 1);  // [H, Lq + Lk - 1]
  }

  Tensor bias_index(const AttnGeometry& g) const override {
    if (!g.positions.defined()) return {};
    return lookup_index(g);
  }

  IndexBias index_bias(const AttnGeometry& g) const override { return {table(), lookup_index(g)}; }

  // The tree bias over (up, down) = 0..K each: updown[u, d] + path[min(u + d, S)] (row K and
  // column K also serve every larger step count, whose path term may be larger).
  BiasGrid bias_grid() const override {
    const int64_t n = k_ + 1, H = updown_.size(1);
    const auto ud = updown_.data().to_vector<double>(), pv = path_.data().to_vector<double>();
    std::vector<double> out(size_t(H * n * n));
    for (int64_t h = 0; h < H; ++h)
      for (int64_t u = 0; u < n; ++u)
        for (int64_t d = 0; d < n; ++d)
          out[size_t((h * n + u) * n + d)] =
              ud[size_t((u * n + d) * H + h)] + pv[size_t(std::min(u + d, s_) * H + h)];
    return {"up: steps from the query token's node to the common ancestor",
            "down: steps from the common ancestor to the key token's node",
            fmt::format("The learned tree bias of each head (times alpha of layer 0): updown[up, down] + path[min(up + "
                        "down, {})]; row and column {} also serve every longer climb.{}",
                        s_, k_, nb_ > 0 ? " The T5-bucketed sequential bias (seq) is added on top, by distance." : ""),
            Tensor::from_vector(out, {H, n, n})};
  }

 private:
  // [(K+1)^2 (S+1), H]: row (u (K+1) + d) (S+1) + s holds updown[u (K+1) + d] + path[s].
  Variable table() const {
    const int64_t ns = s_ + 1, nud = (k_ + 1) * (k_ + 1);
    Tensor ud = cached("ast.ud_rows", {k_, s_}, [&] {
      std::vector<int64_t> v(size_t(nud * ns));
      for (int64_t r = 0; r < nud * ns; ++r) v[size_t(r)] = r / ns;
      return Tensor::from_vector(v, {nud * ns});
    });
    Tensor sr = cached("ast.path_rows", {k_, s_}, [&] {
      std::vector<int64_t> v(size_t(nud * ns));
      for (int64_t r = 0; r < nud * ns; ++r) v[size_t(r)] = r % ns;
      return Tensor::from_vector(v, {nud * ns});
    });
    return embedding(updown_, ud) + embedding(path_, sr);
  }

  // int64 [B, Lq, Lk] rows of table(), from the parent column of geometry.positions.
  Tensor lookup_index(const AttnGeometry& g) const {
    const Tensor& p = g.positions;
    RELPOS_CHECK(p.defined(),
                 "position encoding 'ast' needs each token's tree: its '{}' channel (data.position_channels, from a "
                 "token file written by scripts/prepare_python_ast.py); got no position channels for Lq {} x Lk {}. "
                 "Tokens generated by `relpos sample` have no tree, so an 'ast' model cannot sample, and the "
                 "consecutive-window evaluations (eval --mode windows|sliding|segments) carry no channels: use "
                 "--mode random",
                 channel_, g.Lq, g.Lk);
    RELPOS_CHECK(p.dtype() == DType::I64 && p.dim() == 3 && column_ < p.size(2),
                 "position encoding 'ast': position channels must be int64 [B, L, P] with the '{}' channel in column "
                 "{}, got {}",
                 channel_, column_, describe(p));
    const int64_t B = p.size(0), L = p.size(1);
    RELPOS_CHECK(g.q_offset >= 0 && g.k_offset >= 0 && g.q_offset + g.Lq <= L && g.k_offset + g.Lk <= L,
                 "position encoding 'ast': queries at {}..{} and keys at {}..{} lie outside the {} tokens whose tree "
                 "the batch carries (tokens generated by `relpos sample` have no tree)",
                 g.q_offset, g.q_offset + g.Lq - 1, g.k_offset, g.k_offset + g.Lk - 1, L);
    // Per-batch data from the data pipeline, on the host (as graph_spd's distances); reused by
    // every layer of the stack while the parents and the geometry are the same. Listed in
    // docs/backends.md (justified host loops).
    std::vector<int64_t> all = p.to_vector<int64_t>(), parent(size_t(B * L));
    for (int64_t i = 0; i < B * L; ++i) parent[size_t(i)] = all[size_t(i * p.size(2) + column_)];
    const std::vector<int64_t> key = {g.Lq, g.Lk, g.q_offset, g.k_offset, g.causal, B, L};
    if (memo_.index.defined() && memo_.parent == parent && memo_.key == key && memo_.index.device() == p.device())
      return memo_.index;
    std::vector<int64_t> up(size_t(L * L)), down(size_t(L * L)), idx(size_t(B * g.Lq * g.Lk));
    const int64_t ns = s_ + 1;
    for (int64_t b = 0; b < B; ++b) {
      ast_tree_steps(parent.data() + b * L, L, g.causal && g.q_offset == g.k_offset, up.data(), down.data(),
                     fmt::format("'{}' channel of batch row {}", channel_, b));
      for (int64_t i = 0; i < g.Lq; ++i)
        for (int64_t j = 0; j < g.Lk; ++j) {
          const int64_t qi = g.q_offset + i, kj = g.k_offset + j;
          const int64_t u = up[size_t(qi * L + kj)], d = down[size_t(qi * L + kj)];
          idx[size_t((b * g.Lq + i) * g.Lk + j)] =
              (std::min(u, k_) * (k_ + 1) + std::min(d, k_)) * ns + std::min(u + d, s_);
        }
    }
    memo_ = {parent, key, Tensor::from_vector(idx, {B, g.Lq, g.Lk}).to(p.device())};
    return memo_.index;
  }

  std::string channel_;
  int64_t column_, k_, s_, nb_, md_;
  Variable updown_, path_, seq_;
  struct Memo {
    std::vector<int64_t> parent, key;
    Tensor index;
  };
  mutable Memo memo_;
};
}  // namespace

namespace {
PositionEncodingPtr make_ast(const PositionConfig& cfg, Generator& gen) {
  const std::string ch = kAstParentChannel;
  const int64_t k = cfg.params.get_int("max_steps"), s = cfg.params.get_int("max_path");
  const int64_t nb = cfg.params.get_int("seq_buckets"), md = cfg.params.get_int("seq_max_distance");
  RELPOS_CHECK_CONFIG(k >= 1, "position 'ast': max_steps must be >= 1, got {}", k);
  RELPOS_CHECK_CONFIG(s >= 1, "position 'ast': max_path must be >= 1, got {}", s);
  RELPOS_CHECK_CONFIG(nb == 0 || (nb >= 4 && nb % 2 == 0),
                      "position 'ast': seq_buckets must be 0 (tree bias only) or an even number >= 4, got {}", nb);
  RELPOS_CHECK_CONFIG((k + 1) * (k + 1) * (s + 1) <= kMaxPositionTableRows,
                      "position 'ast': the tree table has (max_steps + 1)^2 (max_path + 1) = {} rows, more than {}",
                      (k + 1) * (k + 1) * (s + 1), kMaxPositionTableRows);
  RELPOS_CHECK_CONFIG(nb == 0 || md > nb / 2, "position 'ast': seq_max_distance ({}) must exceed seq_buckets/2 ({})",
                      md, nb / 2);
  const int64_t column = channel_column(cfg, ch);
  return std::make_shared<AstBias>(ch, column, k, s, nb, md, cfg.n_heads, cfg.init_std, gen, cfg.dtype);
}
}  // namespace

PositionVariant ast_encoding() {
  return {.name = "ast",
          .description = "syntax-tree bias updown[min(up,K), min(down,K)] + path[min(up+down,S)] between two tokens' "
                         "nodes (Code Transformer / TPTrans)",
          .params = {param::integer("max_steps", "8", "K: up and down steps >= K share a row").rows(),
                     param::integer("max_path", "16", "S: tree paths >= S share a row").rows(),
                     param::integer("seq_buckets", "0", "0: tree only; else T5 buckets of a sequential bias added").rows(),
                     param::integer("seq_max_distance", "128", "T5 max_distance of the sequential bias")},
          .make = make_ast,
          .causal_capable = true,
          .fused_attention = true,
          .facts = {.index_bias = true,
                    .probe_score_terms = false,
                    .no_bias_note = "tree encoding: bias[b, h, i, j] = updown[min(up, K), min(down, K), h] + "
                                    "path[min(up + down, S), h] needs each token's parent (data.position_channels); "
                                    "`relpos bias` has no tree (relpos inspect draws it over (up, down))",
                    .position_channels = {kAstParentChannel},
                    .check_channels =
                        [](const std::string& file, const std::vector<uint64_t>& starts,
                           const std::map<std::string, std::vector<int32_t>>& ch) {
                          const auto p = ch.find(kAstParentChannel);
                          if (p == ch.end()) return;  // channel_column refuses a run without it
                          const auto d = ch.find(kAstDepthChannel);
                          check_ast_channels(file, starts, kAstParentChannel, p->second.data(), kAstDepthChannel,
                                             d == ch.end() ? nullptr : d->second.data());
                        }}};
}

}  // namespace relpos::nn
