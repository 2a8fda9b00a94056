#include "experiments/inspect.h"

#include <algorithm>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/attention.h"
#include "nn/positional/graph_spd.h"
#include "nn/positional/registry.h"
#include "trainers/data/data_tasks.h"

namespace relpos::inspect {

nn::PositionConfig gradcheck_config(const nn::PositionType& type, const std::map<std::string, std::string>& params,
                                    bool by_time, int64_t max_len) {
  nn::PositionConfig pc;
  pc.type = type.name();
  pc.d_model = 8;
  pc.n_heads = 2;
  pc.head_dim = 4;
  pc.max_len = max_len;
  pc.init_std = 0.5;
  pc.params = nn::PositionParams(params);
  pc.dtype = DType::F64;
  pc.channels = type->facts.position_channels;
  if (by_time) pc.channels = {"time"}, pc.distance = "time";
  return pc;
}


namespace {
// position_bias with --times: the attention layer's channel path (channel_distance_terms).
BiasReport time_bias(const BiasRequest& req, const nn::PositionEncoding& pos, nn::AttnGeometry g) {
  BiasReport r;
  g.positions = Tensor::from_vector(req.times, {1, req.lq, 1});
  const nn::ChannelDistanceTerms t = nn::channel_distance_terms(pos, g);
  if (t.bias.table.defined()) {
    const auto table = t.bias.table.data().contiguous().to_vector<double>();  // [R, H]
    const auto index = t.bias.index.to_vector<int64_t>();                     // [1, Lq, Lk]
    for (int64_t h = 0; h < req.heads; ++h)
      for (int64_t c = 0; c < req.lq * req.lk; ++c) r.bias.push_back(table[size_t(index[size_t(c)] * req.heads + h)]);
  }
  if (t.rows.defined()) {
    r.index = t.rows.to_vector<int64_t>();
    r.note = "content terms: the index is the table row each (i, j) reads, by time distance";
  }
  return r;
}
}  // namespace

BiasReport position_bias(const BiasRequest& req) {
  RELPOS_CHECK(req.heads > 0 && req.lq > 0 && req.lk > 0, "bias: --heads, --lq and --lk must be positive");
  Generator gen(req.seed);
  nn::PositionConfig pc;
  pc.type = req.type.name();
  pc.n_heads = req.heads;
  pc.head_dim = 8;
  pc.d_model = 8 * req.heads;
  pc.max_len = std::max(req.q_offset + req.lq, req.k_offset + req.lk);
  pc.params = nn::PositionParams(req.params);
  pc.dtype = DType::F64;
  const nn::PositionFacts& facts = req.type->facts;
  pc.channels = facts.position_channels;  // named, so that the encoding builds; this request carries no data
  if (!req.times.empty()) {
    RELPOS_CHECK(req.lq == int64_t(req.times.size()) && req.lk == req.lq && req.q_offset == 0 && req.k_offset == 0,
                 "bias --times: {} times give Lq = Lk = {} at offset 0", req.times.size(), req.times.size());
    pc.channels = {"time"};
    pc.distance = "time";  // refused, naming the encodings that can, unless distance-indexed
  }
  nn::PositionEncodingPtr pos = nn::make_position_encoding(pc, gen);
  if (req.identity_table)
    for (const Variable& p : pos->parameters_in_group(nn::group::kPosition)) {
      if (p.dim() < 1) continue;
      Tensor rows = Tensor::arange(0, p.size(0), DType::F64);
      Shape s(size_t(p.dim()), 1);
      s[0] = p.size(0);
      p.data().copy_(rows.view(s).expand(p.shape()));
    }
  NoGradGuard ng;
  // A causal-only encoding (xpos, cope, transformer_xl) is shown in its causal form.
  nn::AttnGeometry g{req.lq, req.lk, req.q_offset, req.k_offset, req.causal || pos->causal_only()};
  BiasReport r;
  if (!req.times.empty()) return time_bias(req, *pos, g);
  Tensor idx = pos->bias_index(g);
  if (idx.defined()) r.index = idx.to_vector<int64_t>();
  Variable t = pos->toeplitz_bias(g);
  // Score terms at q = k = 0 are their content-independent part: a position-only bias that is
  // not Toeplitz (FIRE, normalised by the query position), in logit units after scaling.
  Variable st;
  if (!t.defined() && !pos->is_absolute() && facts.probe_score_terms) {
    Variable q(Tensor::zeros({1, req.heads, req.lq, pc.head_dim}, DType::F64));
    Variable k(Tensor::zeros({1, req.heads, req.lk, pc.head_dim}, DType::F64));
    st = pos->score_terms(q, k, g);
    if (st.defined()) {
      st = st * pos->score_scale(pc.head_dim);
      const auto v = st.data().to_vector<double>();
      if (std::all_of(v.begin(), v.end(), [](double x) { return x == 0.0; })) st = Variable();
    }
  }
  if (t.defined()) {
    std::vector<double> tv = t.data().to_vector<double>();
    const int64_t n = req.lq + req.lk - 1;
    for (int64_t h = 0; h < req.heads; ++h)
      for (int64_t i = 0; i < req.lq; ++i)
        for (int64_t j = 0; j < req.lk; ++j) r.bias.push_back(tv[size_t(h * n + j - i + req.lq - 1)]);
  } else if (!facts.index_task.empty() || !facts.position_channels.empty()) {
    // the bias needs a per-example index or per-token channels (ast: a tree) this request has not got
    r.note = facts.no_bias_note;
  } else if (Variable sb = pos->score_bias(g); sb.defined()) {
    RELPOS_CHECK(sb.dim() == 3, "bias: '{}' returned a per-example score bias {}", req.type, shape_str(sb.shape()));
    r.bias = sb.data().contiguous().to_vector<double>();  // [H, Lq, Lk]
  } else if (st.defined()) {
    r.bias = st.data().expand({1, req.heads, req.lq, req.lk}).contiguous().to_vector<double>();
  } else if (!facts.no_bias_note.empty()) {
    r.note = facts.no_bias_note;
  } else if (pos->is_absolute()) {
    r.note = "absolute encoding: added to the input embeddings, no attention bias";
  } else {
    r.note = "content-dependent terms (score/value terms), no fixed additive bias";
  }
  return r;
}

namespace {

// Gradcheck parameters: the caller's (--param), then the encoding's own defaults for the 5- and
// 6-token cases below (PositionFacts::gradcheck_params).
std::map<std::string, std::string> gradcheck_params(const nn::PositionType& type,
                                                    std::map<std::string, std::string> params) {
  const auto& d = type->facts.gradcheck_params;
  params.insert(d.begin(), d.end());  // keeps the caller's values
  return params;
}

// Shortest-path distances [2, 10, 10] of two small graphs, each with unreachable pairs:
// example 0: path 0-1-2, edge 3-4, path 5-6-7-8, node 9 isolated; example 1: star 0-{1..6},
// edge 7-8, node 9 isolated. The gradchecks slice the rows and columns of their positions.
Tensor demo_spd() {
  using Adj = std::vector<std::vector<int64_t>>;
  Adj a = {{1}, {0, 2}, {1}, {4}, {3}, {6}, {5, 7}, {6, 8}, {7}, {}};
  Adj b = {{1, 2, 3, 4, 5, 6}, {0}, {0}, {0}, {0}, {0}, {0}, {8}, {7}, {}};
  return nn::shortest_path_distances({a, b}, 10);
}

std::vector<GradcheckCase> stack_hook_gradchecks(const nn::PositionType& type,
                                                 const std::map<std::string, std::string>& params) {
  // Encodings that read position channels (cpe: row, col) also act at the stack level
  // (embed_input, after_block): hidden states [2, L, 8] on a 2x3 grid (row-major, channels row and
  // col as data.position_channels gives them), once with L = 6 and once with 2 padding tokens after
  // the grid, through both hooks; the inputs and every parameter of the encoding are checked.
  std::vector<GradcheckCase> out;
  const auto& chans = type->facts.position_channels;
  if (!chans.empty())
    for (const int64_t L : {6, 8}) {
      Generator gen(23);
      nn::PositionEncodingPtr pos = nn::make_position_encoding(gradcheck_config(type, params), gen);
      const int64_t P = int64_t(chans.size());
      std::vector<int64_t> pv(size_t(2 * L * P), 0);
      std::vector<double> padv(size_t(2 * L), 0.0);
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t t = 0; t < L; ++t) {
          if (t >= 6) padv[size_t(b * L + t)] = 1.0;
          for (int64_t c = 0; c < P; ++c)
            pv[size_t((b * L + t) * P + c)] = t >= 6 ? 0 : chans[size_t(c)] == "row" ? t / 3 : chans[size_t(c)] == "col" ? t % 3 : 0;
        }
      const nn::StackInput si{Tensor::from_vector(pv, {2, L, P}), L > 6 ? Tensor::from_vector(padv, {2, L}) : Tensor(), 0};
      std::vector<Variable> inputs{Variable(Tensor::rand({2, L, 8}, gen, DType::F64, -1, 1), true)};
      for (const Variable& p : pos->parameters()) inputs.push_back(p);
      auto fn = [&](const std::vector<Variable>& in) { return pos->after_block(pos->embed_input(in[0], si), 0, si); };
      const std::string name = fmt::format("stack hooks on a 2x3 grid, L {}{}", L, L > 6 ? " (2 padding)" : "");
      out.push_back({type.name() + ": " + name, gradcheck(type.name() + " (" + name + ")", fn, inputs)});
    }
  return out;
}

// Position channels [2, 10, P] for encodings that read per-token channels (ast: tokens back to
// the parent, 0 = a root): every column holds the same two small trees. Example 0: two
// statements, a chain 0 <- 1 <- 2 <- 3 and siblings; example 1 starts inside a statement (its
// first token's parent lies before the window) and ends with a deep chain.
Tensor demo_channels(int64_t P) {
  const std::vector<int64_t> tree = {0, 1, 1, 1, 3, 0, 1, 1, 2, 4, 3, 1, 2, 1, 0, 1, 1, 1, 3, 5};
  std::vector<int64_t> v;
  for (int64_t x : tree)
    for (int64_t p = 0; p < P; ++p) v.push_back(x);
  return Tensor::from_vector(v, {2, 10, P});
}

std::vector<GradcheckCase> gradchecks_for(const nn::PositionType& type,
                                          const std::map<std::string, std::string>& user) {
  const std::map<std::string, std::string> params = gradcheck_params(type, user);
  const bool causal_capable = type->causal_capable;
  std::vector<GradcheckCase> out;
  struct Geo {
    std::string name;
    bool causal, cross;
  };
  // Encodings the fused kernel serves are checked on both paths (model.attention fused and
  // reference); the others only have the materialised one.
  const bool fusable = type->fused_attention;
  // Distance-indexed encodings are checked again with kj - qi from a `time` channel
  // (model.position.distance: time): repeated times, gaps, two examples that differ.
  const bool channel_capable = type->facts.distance_indexed;
  const Tensor times = Tensor::from_vector(
      std::vector<int64_t>{0, 0, 2, 4, 4, 5, 8, 8, 9, 12, 0, 3, 3, 3, 6, 7, 7, 11, 15, 16}, {2, 10, 1});
  for (const bool by_time : {false, true})
    for (const bool fused : {true, false})
      for (const Geo& geo :
           {Geo{"causal self-attention", true, false}, Geo{"bidirectional self-attention", false, false},
            Geo{"cross-attention Lq!=Lk, offsets, padding", false, true}}) {
        if (fused && !fusable) continue;
        if (by_time && !channel_capable) continue;
        Generator gen(17);
        const nn::PositionConfig pc = gradcheck_config(type, params, by_time);
        nn::PositionEncodingPtr pos = nn::make_position_encoding(pc, gen);
        Tensor positions = by_time ? times : Tensor();  // ast: the demonstration trees, rows 0..9
        if (!by_time && !pc.channels.empty()) {                  // (cross: queries 7..9, keys 2..7)
          positions = demo_channels(int64_t(pc.channels.size()));
          if (!geo.cross) positions = positions.narrow(1, 0, 5).contiguous();
        }
        // Causal-only variants skip the bidirectional case and run the cross geometry causally
        // (queries 7..9 after keys 2..7: the Transformer-XL memory layout); encoder-only
        // variants skip the causal case.
        const bool causal = geo.causal || (geo.cross && pos->causal_only());
        if (!causal && pos->causal_only()) continue;
        if (causal && !causal_capable) continue;
        nn::AttentionConfig ac;
        ac.d_model = 8;
        ac.n_heads = 2;
        ac.bias_scale = {true, true, 0.7, true};
        ac.fused = fused;
        nn::MultiHeadAttention attn(ac, pos, true, gen, DType::F64);
        Variable xq(Tensor::rand({2, geo.cross ? 3 : 5, 8}, gen, DType::F64, -1, 1), true);
        Variable xkv(Tensor::rand({2, 6, 8}, gen, DType::F64, -1, 1), true);
        Tensor pad = Tensor::zeros({2, 6}, DType::F64);
        pad.select(0, 1).narrow(0, 4, 2).fill_(1.0);
        std::vector<Variable> inputs{xq};
        if (geo.cross) inputs.push_back(xkv);
        for (const Variable& p : attn.parameters()) inputs.push_back(p);
        Tensor index;  // graph_spd: the distances between the positions of this case
        if (const std::string& t = type->facts.index_task;
            !t.empty() && train::find_data_task(t).position_index)
          index = geo.cross ? demo_spd().narrow(1, 7, 3).narrow(2, 2, 6) : demo_spd().narrow(1, 0, 5).narrow(2, 0, 5);
        auto fn = [&](const std::vector<Variable>& in) {
          if (geo.cross)
            return attn.forward({.xq = in[0],
                                 .xkv = in[1],
                                 .causal = causal,
                                 .key_padding = pad,
                                 .q_offset = 7,
                                 .k_offset = 2,
                                 .position_index = index,
                                 .positions = positions});
          Variable h = pos->embed(in[0], 0);
          return attn.forward({.xq = h, .xkv = h, .causal = causal, .position_index = index, .positions = positions});
        };
        const std::string name = geo.name + (causal && !geo.causal ? ", causal" : "") +
                                 (by_time ? ", time distance" : "") + (fused ? " [fused]" : " [reference]");
        out.push_back({type.name() + ": " + name, gradcheck(type.name() + " (" + name + ")", fn, inputs)});
      }
  for (auto& c : stack_hook_gradchecks(type, params)) out.push_back(std::move(c));
  return out;
}

}  // namespace

std::vector<GradcheckCase> attention_gradchecks(const std::string& type,
                                                const std::map<std::string, std::string>& params) {
  if (type != "all") return gradchecks_for(type, params);
  RELPOS_CHECK(params.empty(), "gradcheck: --param only applies to a single --type");
  std::vector<GradcheckCase> out;
  for (const auto& v : nn::position_variants())
    for (auto& c : gradchecks_for(v.name, {})) out.push_back(std::move(c));
  return out;
}

}  // namespace relpos::inspect
