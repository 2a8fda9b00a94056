// Index-based and disentangled position encodings: relative_2d (Swin), graph_spd (Graphormer)
// and deberta (DeBERTa-v2). float64 gradchecks through a full attention layer (inputs and
// every parameter), golden values derived by hand from the reference formulas, errors, and
// whole encoder models forward + backward.
#include <catch2/catch.hpp>
#include <array>
#include <cmath>
#include <set>

#include "../helpers.h"
#include "attention_fixture.h"
#include "nn/linear.h"
#include "nn/models.h"
#include "nn/positional/deberta_bucket.h"
#include "nn/positional/graph_spd.h"

using namespace relpos;
using Catch::Contains;
using test::make_attention;
using Params = std::map<std::string, std::string>;

namespace {

Variable param(const nn::Module& m, const std::string& name) {
  for (auto& [n, p] : m.named_parameters())
    if (n == name) return p;
  FAIL("no parameter " << name);
  return {};
}

double abs_sum(const Tensor& t) { return k::sum(k::unary(k::Unary::Abs, t)).item(); }

// The small graphs of the golden tests (L = 5, undirected, adjacency lists):
// example 0: path 0-1-2-3, node 4 isolated (unreachable from the rest);
// example 1: ring 0-1-2-3-0 of 4 nodes, node 4 is padding.
std::vector<std::vector<std::vector<int64_t>>> golden_graphs() {
  return {{{1}, {0, 2}, {1, 3}, {2}, {}}, {{1, 3}, {0, 2}, {1, 3}, {2, 0}}};
}

// Gradcheck of one attention layer with every parameter: self-attention (bidirectional, and
// causal where allowed) and cross-attention Lq != Lk with offsets and key padding.
void attention_gradchecks(const std::string& type, const Params& params, bool causal_ok, const Tensor& self_index,
                          const Tensor& cross_index, int64_t q_off = 3, int64_t k_off = 0) {
  for (int mode = 0; mode < 3; ++mode) {
    if (mode == 1 && !causal_ok) continue;
    auto s = make_attention(type, params, 2, 8, /*bias_scale=*/true);
    const bool cross = mode == 2;
    Variable xq = test::rand_var({2, cross ? 3 : 5, 8}, 61 + mode);
    Variable xkv = test::rand_var({2, 6, 8}, 71);
    Tensor pad = Tensor::zeros({2, 6}, DType::F64);
    pad.narrow(1, 4, 2).select(0, 1).fill_(1.0);  // batch 1: last two keys are padding
    std::vector<Variable> inputs{xq};
    if (cross) inputs.push_back(xkv);
    for (auto& p : s.attn->parameters()) inputs.push_back(p);
    auto fn = [&](const std::vector<Variable>& in) {
      if (cross)
        return s.attn->forward({.xq = in[0],
                                .xkv = in[1],
                                .key_padding = pad,
                                .q_offset = q_off,
                                .k_offset = k_off,
                                .position_index = cross_index});
      return s.attn->forward({.xq = in[0], .xkv = in[0], .causal = mode == 1, .position_index = self_index});
    };
    std::string what = type;
    for (auto& [k, v] : params) what += " " + k + "=" + v;
    what += mode == 0 ? " bidirectional" : mode == 1 ? " causal" : " cross";
    INFO(what);
    test::require_gradcheck(what, fn, inputs);
  }
}

}  // namespace

// ---------------------------------------------------------------- relative_2d (Swin) ----

TEST_CASE("relative_2d: Swin v1 relative_position_index for a 2x3 window, by hand", "[positional][golden]") {
  // Tokens row-major: p -> (h, w) = (p / 3, p % 3): 0 (0,0) 1 (0,1) 2 (0,2) 3 (1,0) 4 (1,1) 5 (1,2).
  // index = (dh + Wh - 1) * (2 Ww - 1) + (dw + Ww - 1) = (dh + 1) * 5 + (dw + 2), d = query - key.
  // Row 0, query (0,0): key (0,0) -> 1*5+2 = 7; (0,1) dw=-1 -> 6; (0,2) -> 5; (1,0) dh=-1 -> 0*5+2 = 2;
  //        (1,1) -> 1; (1,2) -> 0.
  // Row 1, query (0,1): (0,0) dw=+1 -> 8, then 7, 6; (1,0) dh=-1, dw=+1 -> 3, then 2, 1.
  // Row 3, query (1,0): (0,0) dh=+1 -> 2*5+2 = 12, then 11, 10; (1,0) -> 7, 6, 5.
  const std::vector<int64_t> want = {7,  6,  5,  2, 1, 0,  //
                                     8,  7,  6,  3, 2, 1,  //
                                     9,  8,  7,  4, 3, 2,  //
                                     12, 11, 10, 7, 6, 5,  //
                                     13, 12, 11, 8, 7, 6,  //
                                     14, 13, 12, 9, 8, 7};
  auto s = make_attention("relative_2d", {{"grid_h", "2"}, {"grid_w", "3"}});
  nn::AttnGeometry g{6, 6, 0, 0, false};
  REQUIRE(s.attn->position()->bias_index(g).to_vector<int64_t>() == want);
  REQUIRE(param(*s.attn->position(), "table").shape() == Shape{15, 2});  // (2*2-1)*(2*3-1) rows, H
  // Window (2, 2) from the reference table; window 7x7: 169 rows, all used, diagonal 84.
  auto s22 = make_attention("relative_2d", {{"grid_h", "2"}, {"grid_w", "2"}});
  REQUIRE(s22.attn->position()->bias_index({4, 4, 0, 0, false}).to_vector<int64_t>() ==
          std::vector<int64_t>{4, 3, 1, 0, 5, 4, 2, 1, 7, 6, 4, 3, 8, 7, 5, 4});
  auto s77 = make_attention("relative_2d", {{"grid_h", "7"}, {"grid_w", "7"}});
  std::vector<int64_t> i77 = s77.attn->position()->bias_index({49, 49, 0, 0, false}).to_vector<int64_t>();
  std::set<int64_t> distinct(i77.begin(), i77.end());
  REQUIRE(distinct.size() == 169);
  REQUIRE(*distinct.begin() == 0);
  REQUIRE(*distinct.rbegin() == 168);
  for (int64_t i = 0; i < 49; ++i) REQUIRE(i77[size_t(i * 49 + i)] == 84);
  // Offsets address patches of the grid: queries 3..5 against keys 1..4 are rows 3..5, cols 1..4.
  std::vector<int64_t> sub = s.attn->position()->bias_index({3, 4, 3, 1, false}).to_vector<int64_t>();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) REQUIRE(sub[size_t(i * 4 + j)] == want[size_t((3 + i) * 6 + 1 + j)]);
}

TEST_CASE("relative_2d: the bias is table[index, h], [H, L, L]", "[positional][golden]") {
  auto s = make_attention("relative_2d", {{"grid_h", "2"}, {"grid_w", "3"}});
  auto pos = s.attn->position();
  Tensor table = param(*pos, "table").data();
  for (int64_t r = 0; r < 15; ++r)
    for (int64_t h = 0; h < 2; ++h) table.select(0, r).select(0, h).fill_(double(10 * r + h));
  nn::AttnGeometry g{6, 6, 0, 0, false};
  Tensor b = pos->score_bias(g).data();
  REQUIRE(b.shape() == Shape{2, 6, 6});
  std::vector<int64_t> idx = pos->bias_index(g).to_vector<int64_t>();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 6; ++j) REQUIRE(b.at({h, i, j}) == double(10 * idx[size_t(i * 6 + j)] + h));
  // An explicit index (geometry.position_index) replaces the computed one; [B, L, L] -> [B, H, L, L].
  Tensor custom = Tensor::from_vector(std::vector<int64_t>(2 * 6 * 6, 14), {2, 6, 6});
  custom.select(0, 1).fill_(3.0);
  nn::AttnGeometry gi{6, 6, 0, 0, false, custom};
  Tensor bi = pos->score_bias(gi).data();
  REQUIRE(bi.shape() == Shape{2, 2, 6, 6});
  REQUIRE(bi.at({0, 1, 2, 3}) == 141.0);
  REQUIRE(bi.at({1, 0, 5, 0}) == 30.0);
}

TEST_CASE("relative_2d: score_bias sits exactly where the Toeplitz bias does (after scaling, times alpha)",
          "[positional]") {
  // A 1 x L grid is a 1-D relative bias: index = (qi - kj) + L - 1. The same values handed to
  // attention in Toeplitz form (entry t <-> kj - qi = t - (L - 1)) must give the same output.
  const int64_t L = 5, H = 2;
  auto s = make_attention("relative_2d", {{"grid_h", "1"}, {"grid_w", "5"}}, H, 8, /*bias_scale=*/true);
  Tensor table = param(*s.attn->position(), "table").data();  // [2L - 1, H]
  struct Toeplitz : nn::PositionEncoding {
    Variable t;
    std::string type() const override { return "toeplitz_copy"; }
    Variable toeplitz_bias(const nn::AttnGeometry&) const override { return t; }
  };
  auto tp = std::make_shared<Toeplitz>();
  Tensor tt = Tensor::zeros({H, 2 * L - 1}, DType::F64);
  for (int64_t t = 0; t < 2 * L - 1; ++t)
    for (int64_t h = 0; h < H; ++h) tt.select(0, h).select(0, t).fill_(table.at({2 * (L - 1) - t, h}));
  tp->t = Variable(tt);
  Generator gen(1);
  nn::MultiHeadAttention same(nn::AttentionConfig{8, H, 0.0, {true, true, 0.7, true}}, tp, true, gen, DType::F64);
  std::vector<std::pair<std::string, Tensor>> st;  // same projections and alpha, without the table
  for (auto& [n, t] : s.attn->state_dict())
    if (n.rfind("pos.", 0) != 0) st.emplace_back(n, t);
  same.load_state_dict(st);
  Variable x = test::rand_var({2, L, 8}, 91, -1, 1, false);
  Tensor pad = Tensor::zeros({2, L}, DType::F64);
  pad.select(0, 1).narrow(0, 3, 2).fill_(1.0);
  Tensor a = s.attn->forward({.xq = x, .xkv = x, .key_padding = pad}).data();
  Tensor b = same.forward({.xq = x, .xkv = x, .key_padding = pad}).data();
  REQUIRE(test::allclose(a, b, 1e-12, 1e-14));
}

TEST_CASE("relative_2d: float64 gradcheck through attention, every parameter", "[positional][gradcheck]") {
  // grid 3x4 = 12 patches: self-attention on patches 0..4, cross-attention queries 3..5 x keys 0..5
  attention_gradchecks("relative_2d", {{"grid_h", "3"}, {"grid_w", "4"}}, false, Tensor(), Tensor());
  // a 2x3 window with an explicit per-example index
  Generator g(3);
  std::vector<int64_t> v(2 * 5 * 5), w(2 * 3 * 6);
  for (auto& x : v) x = int64_t(g.next_u64() % 15);
  for (auto& x : w) x = int64_t(g.next_u64() % 15);
  attention_gradchecks("relative_2d", {{"grid_h", "2"}, {"grid_w", "3"}}, false, Tensor::from_vector(v, {2, 5, 5}),
                       Tensor::from_vector(w, {2, 3, 6}));
}

TEST_CASE("relative_2d: errors", "[positional][errors]") {
  REQUIRE_THROWS_WITH(make_attention("relative_2d", {{"grid_h", "2"}}), Contains("grid_h and grid_w") &&
                                                                             Contains("required"));
  REQUIRE_THROWS_WITH(make_attention("relative_2d", {{"grid_h", "0"}, {"grid_w", "3"}}), Contains(">= 1"));
  REQUIRE_THROWS_WITH(make_attention("relative_2d", {{"grid_h", "2"}, {"grid_w", "3"}, {"grid", "x"}}),
                      Contains("unknown parameter 'grid'"));
  auto s = make_attention("relative_2d", {{"grid_h", "2"}, {"grid_w", "3"}});
  Variable x = test::rand_var({1, 6, 8}, 1);
  REQUIRE_THROWS_WITH(s.attn->forward({.xq = x, .xkv = x, .causal = true}), Contains("encoder-only"));
  Variable x7 = test::rand_var({1, 7, 8}, 1);
  REQUIRE_THROWS_WITH(s.attn->forward({.xq = x7, .xkv = x7}), Contains("2x3 grid holds 6 tokens"));
  Tensor bad = Tensor::from_vector(std::vector<int64_t>(36, 15), {6, 6});
  REQUIRE_THROWS_WITH(s.attn->forward({.xq = x, .xkv = x, .position_index = bad}),
                      Contains("value 15") && Contains("0..14"));
}

// ---------------------------------------------------------------- graph_spd (Graphormer) ----

TEST_CASE("graph_spd: BFS shortest-path distances with unreachable and padding nodes, by hand", "[positional][golden]") {
  Tensor spd = nn::shortest_path_distances(golden_graphs(), 5);
  REQUIRE(spd.shape() == Shape{2, 5, 5});
  REQUIRE(spd.dtype() == DType::I64);
  const std::vector<int64_t> want = {
      // path 0-1-2-3, node 4 isolated
      0, 1, 2, 3, -1,  //
      1, 0, 1, 2, -1,  //
      2, 1, 0, 1, -1,  //
      3, 2, 1, 0, -1,  //
      -1, -1, -1, -1, 0,
      // ring 0-1-2-3-0 (2 hops across), node 4 padding: -1 everywhere, its diagonal too
      0, 1, 2, 1, -1,  //
      1, 0, 1, 2, -1,  //
      2, 1, 0, 1, -1,  //
      1, 2, 1, 0, -1,  //
      -1, -1, -1, -1, -1};
  REQUIRE(spd.to_vector<int64_t>() == want);
  // directed edges are followed as given: 0 -> 1 -> 2 only
  Tensor d = nn::shortest_path_distances({{{1}, {2}, {}}}, 3);
  REQUIRE(d.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, -1, 0, 1, -1, -1, 0});
  REQUIRE_THROWS_WITH(nn::shortest_path_distances({{{1}, {5}}}, 3), Contains("node 1 lists neighbour 5"));
  REQUIRE_THROWS_WITH(nn::shortest_path_distances({{{}, {}, {}, {}}}, 3), Contains("4 nodes, more than L = 3"));
}

TEST_CASE("graph_spd: bias = table[min(spd, max_dist), h], unreachable has its own row", "[positional][golden]") {
  // max_dist = 2: rows 0, 1 exact, row 2 = "2 or more", row 3 = unreachable.
  auto s = make_attention("graph_spd", {{"max_dist", "2"}});
  auto pos = s.attn->position();
  Tensor table = param(*pos, "table").data();
  REQUIRE(table.shape() == Shape{4, 2});
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t h = 0; h < 2; ++h) table.select(0, r).select(0, h).fill_(double(10 * r + h));
  Tensor spd = nn::shortest_path_distances(golden_graphs(), 5);
  nn::AttnGeometry g{5, 5, 0, 0, false, spd};
  Tensor b = pos->score_bias(g).data();
  REQUIRE(b.shape() == Shape{2, 2, 5, 5});  // [B, H, L, L]
  // By hand from the distances above: example 0, (0,1) d=1 -> row 1; (0,2) d=2 -> row 2;
  // (0,3) d=3 -> clipped to row 2; (0,4) unreachable -> row 3; (4,4) d=0 -> row 0.
  for (int64_t h = 0; h < 2; ++h) {
    REQUIRE(b.at({0, h, 0, 1}) == 10.0 + h);
    REQUIRE(b.at({0, h, 0, 2}) == 20.0 + h);
    REQUIRE(b.at({0, h, 0, 3}) == 20.0 + h);
    REQUIRE(b.at({0, h, 3, 0}) == 20.0 + h);
    REQUIRE(b.at({0, h, 0, 4}) == 30.0 + h);
    REQUIRE(b.at({0, h, 4, 4}) == 0.0 + h);
    REQUIRE(b.at({1, h, 0, 3}) == 10.0 + h);  // ring: 0 and 3 are neighbours
    REQUIRE(b.at({1, h, 4, 4}) == 30.0 + h);  // padding node: unreachable
  }
  REQUIRE(pos->bias_index(g).to_vector<int64_t>()[0 * 25 + 0 * 5 + 4] == 3);
  // A single [L, L] graph shared by the batch gives [H, L, L].
  nn::AttnGeometry g2{5, 5, 0, 0, false, spd.select(0, 0).contiguous()};
  REQUIRE(pos->score_bias(g2).shape() == Shape{2, 5, 5});
}

TEST_CASE("graph_spd: the unreachable row and clipped distances receive gradient", "[positional]") {
  auto s = make_attention("graph_spd", {{"max_dist", "2"}});
  Tensor spd = nn::shortest_path_distances(golden_graphs(), 5);
  Variable x = test::rand_var({2, 5, 8}, 5, -1, 1, false);
  Tensor pad = Tensor::zeros({2, 5}, DType::F64);
  pad.select(0, 1).narrow(0, 4, 1).fill_(1.0);  // example 1: node 4 is padding
  Variable y = s.attn->forward({.xq = x, .xkv = x, .key_padding = pad, .position_index = spd});
  Generator g(2);
  y.backward(Tensor::randn(y.shape(), g, DType::F64));
  Tensor grad = param(*s.attn->position(), "table").grad();
  for (int64_t r = 0; r < 4; ++r) {
    INFO("row " << r);
    REQUIRE(abs_sum(grad.select(0, r)) > 0);
  }
}

TEST_CASE("graph_spd: float64 gradcheck through attention, every parameter", "[positional][gradcheck]") {
  // 10-node graphs: distances 0..4, clipped ones (max_dist 3) and unreachable pairs in every case
  std::vector<std::vector<std::vector<int64_t>>> graphs = {
      {{1}, {0, 2}, {1, 3}, {2, 4}, {3, 5}, {4}, {7}, {6}, {}, {}},
      {{1, 2}, {0}, {0, 3}, {2, 4}, {3}, {6}, {5}, {8}, {7, 9}, {8}}};
  Tensor spd = nn::shortest_path_distances(graphs, 10);
  attention_gradchecks("graph_spd", {{"max_dist", "3"}}, false, spd.narrow(1, 0, 5).narrow(2, 0, 5),
                       spd.narrow(1, 3, 3).narrow(2, 0, 6));
  // one [L, L] graph for the whole batch
  attention_gradchecks("graph_spd", {}, false, spd.select(0, 1).narrow(0, 2, 5).narrow(1, 2, 5),
                       spd.select(0, 0).narrow(0, 3, 3).narrow(1, 2, 6));
}

TEST_CASE("graph_spd: errors", "[positional][errors]") {
  auto s = make_attention("graph_spd");
  Variable x = test::rand_var({2, 5, 8}, 1);
  REQUIRE_THROWS_WITH(s.attn->forward({.xq = x, .xkv = x}),
                      Contains("needs shortest-path distances") && Contains("position_index") && Contains("[B, L, L]"));
  Tensor spd = nn::shortest_path_distances(golden_graphs(), 5);
  REQUIRE_THROWS_WITH(s.attn->forward({.xq = x, .xkv = x, .causal = true, .position_index = spd}),
                      Contains("encoder-only"));
  Tensor wrong = nn::shortest_path_distances(golden_graphs(), 6);
  REQUIRE_THROWS_WITH(s.attn->forward({.xq = x, .xkv = x, .position_index = wrong}),
                      Contains("[B, Lq, Lk] = [B, 5, 5]") && Contains("[2, 6, 6]"));
  Tensor three = nn::shortest_path_distances({golden_graphs()[0], golden_graphs()[0], golden_graphs()[1]}, 5);
  REQUIRE_THROWS_WITH(s.attn->forward({.xq = x, .xkv = x, .position_index = three}),
                      Contains("[B, H, Lq, Lk] = [2, 2, 5, 5]"));
  Tensor neg = Tensor::from_vector(std::vector<int64_t>(25, -2), {5, 5});
  REQUIRE_THROWS_WITH(s.attn->forward({.xq = x, .xkv = x, .position_index = neg}), Contains("distance -2 is invalid"));
  REQUIRE_THROWS_WITH(make_attention("graph_spd", {{"max_dist", "0"}}), Contains("max_dist must be >= 1"));
}

// ---------------------------------------------------------------- deberta ----

TEST_CASE("deberta: log buckets match HF make_log_bucket_position (256 buckets, max position 512)",
          "[positional][golden]") {
  // rpe-variants.md §5.2 / Appendix A: rel = q - k -> HF bucket -> c2p row clamp(bucket + 256, 0, 511)
  struct Row {
    int64_t rel, bucket, c2p;
  };
  const std::vector<Row> rows = {{-1000, -317, 0}, {-600, -270, 0},  {-512, -256, 0},  {-511, -255, 1},
                                 {-300, -207, 49}, {-256, -192, 64}, {-200, -169, 87}, {-129, -129, 127},
                                 {-128, -128, 128}, {-127, -127, 129}, {-64, -64, 192}, {-1, -1, 255},
                                 {0, 0, 256},      {1, 1, 257},      {64, 64, 320},    {127, 127, 383},
                                 {128, 128, 384},  {129, 129, 385},  {130, 130, 386},  {200, 169, 425},
                                 {256, 192, 448},  {300, 207, 463},  {400, 233, 489},  {511, 255, 511},
                                 {512, 256, 511},  {600, 270, 511},  {1000, 317, 511}};
  auto s = make_attention("deberta");  // defaults: position_buckets 256, max_relative_positions 512
  for (const Row& r : rows) {
    INFO("rel " << r.rel);
    REQUIRE(nn::deberta_log_bucket(r.rel, 256, 512) == r.bucket);
    REQUIRE(nn::deberta_log_bucket(-r.rel, 256, 512) == -r.bucket);  // odd: what makes p2c = c2p index
    // bias_index: one query at q_offset, one key at k_offset with q_offset - k_offset = rel
    nn::AttnGeometry g{1, 1, std::max<int64_t>(r.rel, 0), std::max<int64_t>(-r.rel, 0), false};
    REQUIRE(s.attn->position()->bias_index(g).item() == double(r.c2p));
  }
  REQUIRE(param(*s.attn->position(), "rel_embeddings").shape() == Shape{512, 8});
  // no bucketing: the relative position itself
  REQUIRE(nn::deberta_log_bucket(-700, 0, 512) == -700);
}

TEST_CASE("deberta: scale 1/sqrt(d (1 + number of position terms))", "[positional][golden]") {
  REQUIRE(make_attention("deberta").attn->position()->score_scale(64) == Approx(1.0 / std::sqrt(192.0)));
  REQUIRE(make_attention("deberta", {{"pos_att_type", "c2p"}}).attn->position()->score_scale(64) ==
          Approx(1.0 / std::sqrt(128.0)));
  REQUIRE(make_attention("deberta", {{"pos_att_type", "p2c"}}).attn->position()->score_scale(16) ==
          Approx(1.0 / std::sqrt(32.0)));
}

namespace {
// The DeBERTa terms written out with explicit loops, HF's way: P = LayerNorm(table); K_r, Q_r
// from the given projections; c2p via clamp(bucket(qi - kj) + span); p2c via HF's
// r_pos[a][c] = bucket(a - c), p2c_pos = clamp(-r_pos + span), transposed: entry (i, j) uses
// clamp(-bucket(kj - qi) + span) (no use of the odd symmetry).
Tensor naive_deberta(const Tensor& q, const Tensor& k, const nn::AttnGeometry& g, const Tensor& table,
                     const Tensor& lnw, const Tensor& lnb, double eps, const nn::Linear& kp, const nn::Linear& qp,
                     int64_t buckets, int64_t max_rel, bool c2p, bool p2c) {
  const int64_t B = q.size(0), H = q.size(1), dh = q.size(3), D = H * dh, rows = table.size(0);
  const int64_t span = rows / 2;
  std::vector<std::vector<double>> P(size_t(rows), std::vector<double>(size_t(D), 0.0));
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < D; ++c) mean += table.at({r, c}) / double(D);
    for (int64_t c = 0; c < D; ++c) var += (table.at({r, c}) - mean) * (table.at({r, c}) - mean) / double(D);
    for (int64_t c = 0; c < D; ++c)
      P[size_t(r)][size_t(c)] = lnw.defined()
                                    ? (table.at({r, c}) - mean) / std::sqrt(var + eps) * lnw.at({c}) + lnb.at({c})
                                    : table.at({r, c});
  }
  auto proj = [&](const nn::Linear& l, int64_t r, int64_t o) {
    double acc = l.bias().data().at({o});
    for (int64_t c = 0; c < D; ++c) acc += P[size_t(r)][size_t(c)] * l.weight().data().at({o, c});
    return acc;
  };
  auto clampi = [&](int64_t v) { return std::clamp<int64_t>(v, 0, 2 * span - 1); };
  Tensor out = Tensor::zeros({B, H, g.Lq, g.Lk}, DType::F64);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < g.Lq; ++i)
        for (int64_t j = 0; j < g.Lk; ++j) {
          const int64_t qi = g.q_offset + i, kj = g.k_offset + j;
          double v = 0;
          const int64_t rc = clampi(nn::deberta_log_bucket(qi - kj, buckets, max_rel) + span);
          const int64_t rp = clampi(-nn::deberta_log_bucket(kj - qi, buckets, max_rel) + span);
          for (int64_t d = 0; d < dh; ++d) {
            if (c2p) v += q.at({b, h, i, d}) * proj(kp, rc, h * dh + d);
            if (p2c) v += k.at({b, h, j, d}) * proj(qp, rp, h * dh + d);
          }
          out.select(0, b).select(0, h).select(0, i).select(0, j).fill_(v);
        }
  return out;
}
}  // namespace

TEST_CASE("deberta: c2p + p2c equal HF's formulas written as loops", "[positional][golden]") {
  struct Case {
    Params params;
    int64_t buckets, max_rel;
  };
  // log buckets (mid 2, |rel| up to 6), and no bucketing with a span of 3 (clamped at both ends)
  for (const Case& c : {Case{{{"position_buckets", "4"}, {"max_relative_positions", "8"}}, 4, 8},
                        Case{{{"position_buckets", "0"}, {"max_relative_positions", "3"}}, 0, 3},
                        Case{{{"position_buckets", "4"}, {"max_relative_positions", "8"}, {"norm_rel_ebd", "none"},
                              {"pos_att_type", "c2p"}},
                             4, 8}})
    for (bool share : {true, false}) {
      Params p = c.params;
      p["share_att_key"] = share ? "true" : "false";
      auto s = make_attention("deberta", p, 2, 8);
      auto pos = s.attn->position();
      Generator gen(8);
      nn::Linear wq(8, 8, true, gen, DType::F64), wk(8, 8, true, gen, DType::F64);
      const bool has_p2c = !p.count("pos_att_type"), ln = !p.count("norm_rel_ebd");  // c2p is always on here
      // the projections of the position embeddings: the layer's (share) or the encoding's own
      nn::Linear own_k(8, 8, true, gen, DType::F64), own_q(8, 8, true, gen, DType::F64);
      if (!share) {
        own_k.weight().data().copy_(param(*pos, "pos_key_proj.weight").data());
        own_k.bias().data().copy_(param(*pos, "pos_key_proj.bias").data());
        if (has_p2c) {
          own_q.weight().data().copy_(param(*pos, "pos_query_proj.weight").data());
          own_q.bias().data().copy_(param(*pos, "pos_query_proj.bias").data());
        }
      }
      const nn::Linear& kl = share ? wk : own_k;
      const nn::Linear& ql = share ? wq : own_q;
      // geometries: self-attention L = 7 (HF's case), and cross-attention with offsets
      for (auto [Lq, Lk, qo, ko] : std::vector<std::array<int64_t, 4>>{{7, 7, 0, 0}, {3, 6, 4, 1}, {6, 2, 0, 3}}) {
        nn::AttnGeometry g{Lq, Lk, qo, ko, false};
        g.q_proj = [&](const Variable& x) { return wq.forward(x); };
        g.k_proj = [&](const Variable& x) { return wk.forward(x); };
        Tensor q = test::rand_var({2, 2, Lq, 4}, 3, -1, 1, false).data();
        Tensor k = test::rand_var({2, 2, Lk, 4}, 4, -1, 1, false).data();
        Tensor got = pos->score_terms(Variable(q), Variable(k), g).data();
        Tensor want = naive_deberta(q, k, g, param(*pos, "rel_embeddings").data(),
                                    ln ? param(*pos, "norm_weight").data() : Tensor(),
                                    ln ? param(*pos, "norm_bias").data() : Tensor(), 1e-7, kl, ql, c.buckets,
                                    c.max_rel, true, has_p2c);
        INFO("share " << share << " Lq " << Lq << " Lk " << Lk << " offsets " << qo << " " << ko);
        REQUIRE(test::allclose(got, want, 1e-10, 1e-12));
      }
    }
}

TEST_CASE("deberta: float64 gradcheck through attention, every parameter", "[positional][gradcheck]") {
  const Params small = {{"position_buckets", "4"}, {"max_relative_positions", "8"}};
  for (const char* share : {"true", "false"})
    for (const char* att : {"c2p|p2c", "c2p", "p2c"}) {
      Params p = small;
      p["share_att_key"] = share;
      p["pos_att_type"] = att;
      attention_gradchecks("deberta", p, true, Tensor(), Tensor(), 7, 2);
    }
  attention_gradchecks("deberta",
                       {{"position_buckets", "0"}, {"max_relative_positions", "3"}, {"norm_rel_ebd", "none"}}, true,
                       Tensor(), Tensor(), 7, 2);
}

TEST_CASE("deberta: token-by-token decoding with a KV cache equals the full causal pass", "[positional][kvcache]") {
  auto s = make_attention("deberta", {{"position_buckets", "4"}, {"max_relative_positions", "8"}}, 2, 8, true);
  s.attn->eval();
  Variable x = test::rand_var({2, 7, 8}, 31, -1, 1, false);
  Tensor full = s.attn->forward({.xq = x, .xkv = x, .causal = true}).data();
  nn::KVCache cache;
  std::vector<Tensor> steps;
  for (int64_t t = 0; t < 7; ++t) {
    Variable xt = narrow(x, 1, t, 1);
    steps.push_back(
        s.attn->forward({.xq = xt, .xkv = xt, .causal = true, .q_offset = t, .k_offset = t}, {.cache = &cache}).data());
  }
  REQUIRE(test::allclose(k::cat(steps, 1), full, 1e-10, 1e-12));
}

TEST_CASE("deberta: errors", "[positional][errors]") {
  REQUIRE_THROWS_WITH(make_attention("deberta", {{"position_buckets", "3"}}), Contains("even number"));
  REQUIRE_THROWS_WITH(make_attention("deberta", {{"position_buckets", "256"}, {"max_relative_positions", "100"}}),
                      Contains("max_relative_positions - 1 (99) > position_buckets / 2"));
  REQUIRE_THROWS_WITH(make_attention("deberta", {{"pos_att_type", "p2p"}}), Contains("'p2p' is not one of"));
  // share_att_key needs the layer's projections: a geometry built outside attention has none
  auto s = make_attention("deberta");
  Variable q = test::rand_var({1, 2, 3, 4}, 1);
  REQUIRE_THROWS_WITH(s.attn->position()->score_terms(q, q, nn::AttnGeometry{3, 3, 0, 0, false}),
                      Contains("k_proj") && Contains("share_att_key=false"));
}

// ---------------------------------------------------------------- whole models ----

namespace {
nn::ModelConfig encoder(const std::string& pos, Params params, int64_t layers = 2) {
  nn::ModelConfig c;
  c.kind = nn::ModelKind::Encoder;
  c.vocab = 11;
  c.d_model = 8;
  c.n_layers = layers;
  c.n_heads = 2;
  c.d_ff = 16;
  c.max_len = 32;
  c.position = pos;
  c.position_params = nn::PositionParams(params);
  c.position_std = 0.3;
  c.init_std = 0.5;
  c.bias_scale = {true, true, 0.5, true};
  c.dtype = DType::F64;
  return c;
}

Tensor tokens(int64_t B, int64_t L, uint64_t seed) {
  Generator g(seed);
  std::vector<int64_t> v(size_t(B * L));
  for (auto& x : v) x = int64_t(g.next_u64() % 11);
  return Tensor::from_vector(v, {B, L});
}

struct ModelCase {
  std::string pos;
  Params params;
  std::vector<std::string> position_params;  // shared by the stack: "stack.pos.*"
};

const std::vector<ModelCase>& model_cases() {
  static const std::vector<ModelCase> v = {
      {"relative_2d", {{"grid_h", "2"}, {"grid_w", "3"}}, {"stack.pos.table"}},
      {"graph_spd", {{"max_dist", "2"}}, {"stack.pos.table"}},
      {"deberta",
       {{"position_buckets", "4"}, {"max_relative_positions", "8"}},
       {"stack.pos.rel_embeddings", "stack.pos.norm_weight", "stack.pos.norm_bias"}},
      {"deberta",
       {{"share_att_key", "false"}},
       {"stack.pos.rel_embeddings", "stack.pos.pos_key_proj.weight", "stack.pos.pos_query_proj.bias"}},
  };
  return v;
}
}  // namespace

TEST_CASE("models: encoder forward + backward with each index-based variant", "[nn][models]") {
  Tensor spd = nn::shortest_path_distances(
      {{{1}, {0, 2}, {1, 3}, {2, 4}, {3}, {}}, {{1, 3}, {0, 2}, {1, 3}, {2, 0}, {5}, {4}}}, 6);
  for (const ModelCase& c : model_cases()) {
    INFO(c.pos);
    nn::Model m(encoder(c.pos, c.params));
    Tensor x = tokens(2, 6, 3);
    Tensor pad = Tensor::zeros({2, 6}, DType::F64);
    pad.select(0, 1).narrow(0, 5, 1).fill_(1.0);
    Variable logits = m.forward(x, pad, nullptr, nullptr, c.pos == "graph_spd" ? spd : Tensor());
    REQUIRE(logits.shape() == Shape{2, 6, 11});
    Variable loss = cross_entropy(reshape(logits, {12, 11}), tokens(2, 6, 4).reshape({12}));
    loss.backward();
    for (auto& [n, p] : m.named_parameters()) {
      INFO(n);
      if (c.pos == "deberta" && n.find("bias_scale") != std::string::npos) continue;  // no additive bias to scale
      REQUIRE(p.grad().defined());
      REQUIRE(std::isfinite(abs_sum(p.grad())));
    }
    for (const std::string& n : c.position_params) {
      INFO(n);
      REQUIRE(abs_sum(param(m, n).grad()) > 0);  // one shared encoding, gradient from both layers
    }
    for (auto& [n, p] : m.named_parameters()) REQUIRE(n.find("layers.1.attn.pos.") == std::string::npos);
  }
}

TEST_CASE("models: full-model float64 gradcheck, encoder with each index-based variant", "[nn][models][gradcheck]") {
  Tensor spd = nn::shortest_path_distances({{{1}, {0, 2}, {1}, {}, {}}, {{1}, {0, 2}, {1, 3}, {2, 4}, {3}}}, 5);
  for (const ModelCase& c : model_cases()) {
    if (c.params.empty() || c.params.count("share_att_key")) continue;  // the 512-row default table is slow to probe
    nn::Model m(encoder(c.pos, c.params, 1));
    Tensor x = tokens(2, 5, 7);
    auto fn = [&](const std::vector<Variable>&) {
      return m.forward(x, Tensor(), nullptr, nullptr, c.pos == "graph_spd" ? spd : Tensor());
    };
    INFO(c.pos);
    test::require_gradcheck("encoder " + c.pos, fn, m.parameters());
  }
}

TEST_CASE("models: encoder-only variants are rejected in a decoder, graph_spd needs its index", "[nn][models][errors]") {
  for (const char* pos : {"relative_2d", "graph_spd"}) {
    Params p = std::string(pos) == "relative_2d" ? Params{{"grid_h", "2"}, {"grid_w", "3"}} : Params{};
    auto c = encoder(pos, p);
    c.kind = nn::ModelKind::Decoder;
    INFO(pos);
    REQUIRE_THROWS_WITH(nn::Model(c), Contains("encoder-only") && Contains(pos));
    c.kind = nn::ModelKind::EncoderDecoder;
    REQUIRE_THROWS_WITH(nn::Model(c), Contains("encoder-only"));
  }
  nn::Model m(encoder("graph_spd", {}));
  REQUIRE_THROWS_WITH(m.forward(tokens(2, 6, 1)), Contains("graph_spd") && Contains("position_index"));
}

TEST_CASE("shaw golden: relative distances clipped to [-k_max, k_max] on both sides (index and buckets)", "[nn][shaw][golden]") {
  // Shaw et al. 2018: a_ij = w[clip(j - i, -k, k)]; row index clip(j - i, -k, k) + k, derived by
  // hand for k = 2, Lq = Lk = 5 (distances -4..4: both clipped ends reached).
  const std::vector<int64_t> want = {2, 3, 4, 4, 4,  //
                                     1, 2, 3, 4, 4,  //
                                     0, 1, 2, 3, 4,  //
                                     0, 0, 1, 2, 3,  //
                                     0, 0, 0, 1, 2};
  auto s = make_attention("shaw", {{"k_max", "2"}});
  nn::AttnGeometry g{5, 5, 0, 0, false};
  REQUIRE(s.attn->position()->bias_index(g).to_vector<int64_t>() == want);
  // the fused path's Toeplitz buckets: distance t - (Lq - 1) for t = 0..8 -> the same rows
  REQUIRE(s.attn->position()->bucketed_terms(g).bucket.to_vector<int64_t>() ==
          std::vector<int64_t>{0, 0, 0, 1, 2, 3, 4, 4, 4});
  // offsets (a KV cache): query 3 against keys 0..6 -> distances -3..3
  REQUIRE(s.attn->position()->bias_index({1, 7, 3, 0, false}).to_vector<int64_t>() ==
          std::vector<int64_t>{0, 0, 1, 2, 3, 4, 4});
}
