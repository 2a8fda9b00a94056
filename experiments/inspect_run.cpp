// experiments/inspect_run.cpp — `relpos inspect` views (see inspect_run.h). Everything on the
// model side is tensor ops; the host reads only final, small results (a bias row per layer,
// one norm per table row) and, for the one-entry gradcheck, writes one parameter element.
#include "experiments/inspect_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "experiments/inspect.h"
#include "kernels/ops.h"
#include "nn/attention.h"
#include "nn/positional/registry.h"

namespace relpos::train {

std::vector<BiasCurve> learned_bias(const nn::Model& model, int64_t n, std::string* note) {
  NoGradGuard ng;
  std::vector<BiasCurve> out;
  const auto& blocks = model.main_stack().blocks();
  const nn::PositionType& type = model.config().position;
  for (size_t li = 0; li < blocks.size(); ++li) {
    const nn::MultiHeadAttention& a = blocks[li]->self_attention();
    const auto& pos = a.position();
    nn::AttnGeometry geo{n, n, 0, 0, true, Tensor()};
    Tensor row;  // [H, n]: bias of query n-1 against keys 0..n-1 (distance j - (n-1))
    if (Variable tb = pos->toeplitz_bias(geo); tb.defined()) {
      // entry t <-> distance t - (n - 1); the causal half is t = 0 .. n-1
      row = tb.data().narrow(1, 0, n).contiguous();
      if (a.bias_scale().defined()) row = k::mul(row, a.bias_scale().data());
    } else if (type->facts.index_bias) {
      // relative_2d, graph_spd look their bias up by a 2D / graph index, not by a distance:
      // their table is shown by the gradient rows and the attention maps.
      if (note)
        *note = fmt::format("'{}' looks its bias up by a patch-grid or graph index, not by a distance: see the "
                            "position-table gradient rows and the attention maps", type);
      return {};
    } else if (Variable sb = pos->score_bias(nn::AttnGeometry{1, n, n - 1, 0, true, Tensor()}); sb.defined()) {
      // A dense score bias (FIRE, dynamic biases): only query n-1's row is formed ([H, 1, n] or
      // [1, H, 1, n]: O(n) memory at any --distances), keys 0..n-1 as above; times alpha.
      Tensor d = sb.data();
      if (d.dim() == 4) d = d.select(0, 0);
      row = d.select(1, 0).contiguous();
      if (a.bias_scale().defined()) row = k::mul(row, a.bias_scale().data());
    } else {
      if (note)
        *note = fmt::format("'{}' adds no distance-only bias (it rotates q/k, adds content-dependent terms or "
                            "absolute embeddings): see the attention maps", type);
      return {};
    }
    // Host loop over the final [H, n] result.
    const auto v = row.to_vector<double>();
    const int64_t H = row.size(0);
    for (int64_t h = 0; h < H; ++h) {
      BiasCurve c{int64_t(li), h, {}, {}};
      for (int64_t j = n - 1; j >= 0; --j) {  // distance 0, -1, ...
        c.distance.push_back(j - (n - 1));
        c.bias.push_back(v[size_t(h * n + j)]);
      }
      out.push_back(c);
    }
  }
  // Equal in every layer: listed once (a figure would draw the same line once per layer).
  const size_t per_layer = blocks.empty() ? 0 : out.size() / blocks.size();
  bool same = blocks.size() > 1 && per_layer * blocks.size() == out.size();
  for (size_t i = per_layer; same && i < out.size(); ++i) same = out[i].bias == out[i % per_layer].bias;
  if (same) {
    out.resize(per_layer);
    for (auto& c : out) c.layer = -1;
  }
  return out;
}

std::optional<BiasGridView> learned_bias_grid(const nn::Model& model) {
  NoGradGuard ng;
  const auto& blocks = model.main_stack().blocks();
  if (blocks.empty()) return std::nullopt;
  const nn::MultiHeadAttention& a = blocks.front()->self_attention();
  const nn::PositionEncoding::BiasGrid g = a.position()->bias_grid();
  if (!g.bias.defined()) return std::nullopt;
  const int64_t H = g.bias.size(0), R = g.bias.size(1), C = g.bias.size(2);
  std::vector<double> alpha(size_t(H), 1.0);
  if (a.bias_scale().defined()) {  // [H] or [1]
    const auto s = a.bias_scale().data().to_vector<double>();
    for (int64_t h = 0; h < H; ++h) alpha[size_t(h)] = s[s.size() == 1 ? 0 : size_t(h)];
  }
  const auto v = g.bias.to_vector<double>();  // final [H, R, C] result
  BiasGridView out{g.row_axis, g.col_axis, g.note, {}};
  for (int64_t h = 0; h < H; ++h) {
    std::vector<std::vector<double>> m(static_cast<size_t>(R), std::vector<double>(static_cast<size_t>(C)));
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) m[size_t(r)][size_t(c)] = alpha[size_t(h)] * v[size_t((h * R + r) * C + c)];
    out.heads.push_back(std::move(m));
  }
  return out;
}

namespace {

// Which distances kj - qi each row of a distance-indexed table serves (RowGrad::row_distances):
// the encoding's lookup index for one query against keys up to `probe` tokens away.
std::vector<std::optional<std::pair<int64_t, int64_t>>> row_distances(const nn::PositionEncoding& pos, int64_t rows,
                                                                      int64_t probe, bool causal) {
  // query at position probe, keys 0 .. probe (causal) or 0 .. 2 probe: distances -probe .. (0 | probe)
  const int64_t lk = causal ? probe + 1 : 2 * probe + 1;
  Tensor idx = pos.bias_index(nn::AttnGeometry{1, lk, probe, 0, causal, Tensor()});
  if (!idx.defined() || idx.numel() != lk) return {};
  const auto v = idx.to_vector<int64_t>();
  std::vector<std::optional<std::pair<int64_t, int64_t>>> out(static_cast<size_t>(rows));
  for (int64_t j = 0; j < lk; ++j) {
    const int64_t r = v[size_t(j)], d = j - probe;
    if (r < 0 || r >= rows) return {};  // not an index into this table
    auto& o = out[size_t(r)];
    o = o ? std::make_pair(std::min(o->first, d), std::max(o->second, d)) : std::make_pair(d, d);
  }
  return out;
}

}  // namespace

std::vector<RowGrad> position_grad_rows(nn::Model& model, const Dataset& data, uint64_t seed) {
  Generator g(seed);
  Batch b = data.train_batch(g);
  model.zero_grad();
  Variable logits = model.logits(b.model_input());
  const int64_t V = logits.size(-1);
  cross_entropy(reshape(logits, {-1, V}), b.target.reshape({-1}), kIgnore).backward();
  std::vector<RowGrad> out;
  for (const auto& np : model.named_parameters_with_groups()) {
    if (np.group != nn::group::kPosition || !np.param.grad().defined()) continue;
    const Tensor& gr = np.param.grad();
    RowGrad r{np.name, gr.shape(), {}};
    Tensor sq = k::mul(gr, gr);
    std::vector<int64_t> rest;
    for (int64_t d = 1; d < gr.dim(); ++d) rest.push_back(d);
    Tensor rows = rest.empty() ? sq : k::reduce(k::Reduce::Sum, sq, rest, false);  // [shape[0]]
    r.row_norm = k::unary(k::Unary::Sqrt, rows).to_vector<double>();
    // Distance-indexed tables: the distances of each row, probed to 4x the training length.
    const auto& pos = model.main_stack().blocks().front()->self_attention().position();
    r.train_distance = b.input.size(1) - 1;
    if (pos && pos->distance_column() >= 0 && b.positions.defined()) {              // distances from a channel (time)
      const Tensor c = b.positions.select(2, pos->distance_column()).contiguous();  // [B, L]
      const auto v = c.to_vector<int64_t>();
      const int64_t L = c.size(1);
      r.train_distance = 0;
      for (int64_t row = 0; row < c.size(0); ++row) {
        const auto [lo, hi] = std::minmax_element(v.begin() + row * L, v.begin() + (row + 1) * L);
        r.train_distance = std::max(r.train_distance, *hi - *lo);
      }
    }
    r.probe_distance = std::max<int64_t>(4 * b.input.size(1), 256);
    if (pos && gr.dim() >= 1 && !model.config().position->facts.index_bias)
      r.row_distances = row_distances(*pos, gr.size(0), r.probe_distance, model.main_stack().causal());
    out.push_back(r);
  }
  model.zero_grad();
  return out;
}

std::vector<Tensor> attention_maps(const nn::Model& model, const Tensor& tokens, const Tensor& positions) {
  NoGradGuard ng;
  // P itself is wanted: the reference path forms it (the fused kernel never does).
  struct ReferencePath {
    bool was = nn::fused_attention_enabled();
    ReferencePath() { nn::set_fused_attention(false); }
    ~ReferencePath() { nn::set_fused_attention(was); }
  } reference_path;
  std::vector<nn::AttentionStats> stats;
  model.forward(tokens, Tensor(), nullptr, &stats, Tensor(), positions);
  std::vector<Tensor> out;
  for (auto& s : stats) out.push_back(s.probs.select(0, 0).contiguous());  // [H, L, L]
  return out;
}

namespace {

std::string shape_label(const Shape& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

}  // namespace

std::string attention_graph_dot(const nn::Model& model, int64_t L, uint64_t seed, const Tensor& position_index,
                                const Tensor& positions) {
  const nn::MultiHeadAttention& a = model.main_stack().blocks().front()->self_attention();
  const int64_t D = model.config().d_model;
  Generator g(seed);
  Variable x(Tensor::randn({1, L, D}, g, model.config().dtype), true);
  x.set_name("x");
  Variable y = a.forward({.xq = x,
                          .xkv = x,
                          .causal = model.main_stack().causal(),
                          .position_index = position_index,
                          .positions = positions});
  Tensor u = Tensor::randn(y.shape(), g, y.dtype());
  // Name the leaves: AccumulateGrad node -> parameter name. The model's names, so that tables
  // shared by the stack (T5's stack.pos.table) are named too, not only the layer's own weights.
  std::map<const Node*, std::string> leaf;
  leaf[x.gradient_edge().fn.get()] = "input x";
  for (auto& [n, p] : model.named_parameters())
    if (auto e = p.gradient_edge(); e.fn) leaf[e.fn.get()] = n;
  // Walk the graph from the output; hook every node to record the gradient reaching it.
  struct Seen {
    int id;
    std::string shape;
    double norm = -1;
  };
  std::map<const Node*, Seen> nodes;
  std::vector<std::pair<const Node*, const Node*>> edges;  // producer -> consumer
  std::vector<std::shared_ptr<Node>> stack{y.grad_fn()};
  while (!stack.empty()) {
    auto n = stack.back();
    stack.pop_back();
    if (!n || nodes.count(n.get())) continue;
    nodes[n.get()] = {int(nodes.size()), "", -1};
    Node* raw = n.get();
    n->pre_hooks().push_back([raw, &nodes](const Tensor& gout) {
      Seen& s = nodes[raw];
      s.shape = shape_label(gout.shape());
      s.norm = std::sqrt(k::sum(k::mul(gout, gout)).item());
      return Tensor();
    });
    for (auto& e : n->next_edges())
      if (e.fn) {
        edges.emplace_back(e.fn.get(), raw);
        stack.push_back(e.fn);
      }
  }
  sum(y * Variable(u)).backward();
  std::ostringstream o;
  o << "// autograd graph of layers.0 self-attention: out = attn(x, x), loss = sum(out * u), seed " << seed
    << "\n// node: op (or parameter), shape of its output, ||dL/d output||; edges point along the forward pass\n";
  o << "digraph attention {\n  rankdir=LR;\n  node [shape=record, fontname=\"monospace\", fontsize=10];\n";
  for (auto& [n, s] : nodes) {
    auto it = leaf.find(n);
    const bool is_leaf = it != leaf.end();
    std::string name = is_leaf ? it->second : n->name();
    o << fmt::format("  n{} [label=\"{{{}|{}|grad norm {:.3e}}}\"{}];\n", s.id, name, s.shape, s.norm,
                     is_leaf ? ", style=filled, fillcolor=\"#dde8f7\"" : "");
  }
  o << fmt::format("  out [label=\"{{loss = sum(out * u)|{}}}\", style=filled, fillcolor=\"#f7e3dd\"];\n",
                   shape_label(y.shape()));
  o << fmt::format("  n{} -> out;\n", nodes[y.grad_fn().get()].id);
  for (auto& [p, c] : edges)
    o << fmt::format("  n{} -> n{} [label=\"{} |g| {:.2e}\"];\n", nodes[p].id, nodes[c].id, nodes[p].shape,
                     nodes[p].norm);
  o << "}\n";
  // The hooks captured a local map: drop them with the graph.
  for (auto& [n, s] : nodes) const_cast<Node*>(n)->pre_hooks().clear();
  return o.str();
}

EntryCheck entry_gradcheck(const nn::PositionType& type, const std::map<std::string, std::string>& params,
                           const std::string& param, const std::vector<int64_t>& index, double eps) {
  Generator gen(5);
  const nn::PositionConfig pc = inspect::gradcheck_config(type, params, false, 64);
  nn::AttentionConfig ac;
  ac.d_model = 8;
  ac.n_heads = 2;
  ac.bias_scale.enabled = true;
  ac.bias_scale.init = 0.7;
  ac.bias_scale.per_head = true;
  nn::MultiHeadAttention attn(ac, nn::make_position_encoding(pc, gen), true, gen, DType::F64);
  const bool causal = type->causal_capable;
  Generator g(11);
  Variable x(Tensor::rand({2, 6, 8}, g, DType::F64, -1, 1));
  Tensor u = Tensor::rand({2, 6, 8}, g, DType::F64, -1, 1);
  EntryCheck r;
  Variable target;
  for (const auto& np : attn.named_parameters_with_groups()) {
    r.params.push_back(np.name);
    if (!target.defined() && (param.empty() ? np.group == nn::group::kPosition && np.name != "bias_scale" : np.name == param)) {
      target = np.param;
      r.param = np.name;
    }
  }
  RELPOS_CHECK_CONFIG(target.defined(), "gradcheck --entry: no parameter '{}' in a '{}' attention layer; it has: {}",
                      param.empty() ? "(position table)" : param, type, fmt::format("{}", fmt::join(r.params, ", ")));
  r.index = index.empty() ? std::vector<int64_t>(size_t(target.dim()), 0) : index;
  RELPOS_CHECK_CONFIG(int64_t(r.index.size()) == target.dim(), "gradcheck --entry: '{}' is {}, the index needs {} "
                      "numbers", r.param, shape_label(target.shape()), target.dim());
  int64_t flat = 0;
  for (int64_t d = 0; d < target.dim(); ++d) {
    RELPOS_CHECK_CONFIG(r.index[size_t(d)] >= 0 && r.index[size_t(d)] < target.size(d),
                        "gradcheck --entry: index {} is outside {} {}", fmt::format("{}", fmt::join(r.index, ",")),
                        r.param, shape_label(target.shape()));
    flat = flat * target.size(d) + r.index[size_t(d)];
  }
  // Encodings that read per-token channels (ast: tokens back to the parent) get the same small
  // tree in every column: 0 <- 1 <- 2, 0 <- 3, 3 <- 4, a second root 5.
  Tensor positions;
  if (!pc.channels.empty()) {
    const int64_t P = int64_t(pc.channels.size());
    std::vector<int64_t> v;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t x0 : {0, 1, 1, 3, 1, 0})
        for (int64_t p = 0; p < P; ++p) v.push_back(x0);
    positions = Tensor::from_vector(v, {2, 6, P});
  }
  auto loss = [&]() {
    return sum(attn.forward({.xq = x, .xkv = x, .causal = causal, .positions = positions}) * Variable(u));
  };
  loss().backward();
  r.analytic = target.grad().contiguous().to_vector<double>()[size_t(flat)];
  NoGradGuard ng;
  double* p = target.data().data<double>() + flat;  // one element of a contiguous float64 parameter
  const double v = *p;
  *p = v + eps;
  const double lp = loss().item();
  *p = v - eps;
  const double lm = loss().item();
  *p = v;
  r.numeric = (lp - lm) / (2 * eps);
  return r;
}

}  // namespace relpos::train
