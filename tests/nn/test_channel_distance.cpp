// model.position.distance: a channel (an onset time) for the distance-indexed encodings
// (PositionFacts::distance_indexed; nn/positional/channel_distance.cpp).
//  - every such encoding, with the channel equal to the token positions (plus a per-example
//    constant), gives the index form's output and gradients on both attention paths;
//  - golden values of the time form: T5 buckets of time distances from numpy (HF's
//    _relative_position_bucket transcribed), ALiBi and Shaw / Music Transformer rows by hand;
//  - the refusals: a channel on an encoding that is not distance-indexed, a channel the data does
//    not carry.
#include <catch2/catch.hpp>

#include "../helpers.h"
#include "autograd/ops.h"
#include "nn/attention.h"
#include "nn/positional/registry.h"
#include "experiments/inspect.h"

using namespace relpos;
using Catch::Contains;
using relpos::test::allclose;

namespace {

std::shared_ptr<nn::MultiHeadAttention> layer(const std::string& type, const std::string& distance, bool fused,
                                              std::map<std::string, std::string> params = {}) {
  Generator gen(11);
  nn::PositionConfig pc;
  pc.type = type;
  pc.d_model = 8;
  pc.n_heads = 2;
  pc.head_dim = 4;
  pc.max_len = 32;
  pc.init_std = 0.5;
  pc.params = nn::PositionParams(std::move(params));
  pc.dtype = DType::F64;
  pc.channels = {"beat", "time"};
  pc.distance = distance;
  nn::AttentionConfig ac;
  ac.d_model = 8;
  ac.n_heads = 2;
  ac.bias_scale = {true, true, 0.7, true};
  ac.fused = fused;
  return std::make_shared<nn::MultiHeadAttention>(ac, nn::make_position_encoding(pc, gen), true, gen, DType::F64);
}

// [B, L, 2]: column 0 junk, column 1 (`time`) = position + 100 b
Tensor index_as_channel(int64_t B, int64_t L) {
  std::vector<int64_t> v;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t) v.push_back(7 * t % 5), v.push_back(t + 100 * b);
  return Tensor::from_vector(v, {B, L, 2});
}

}  // namespace

TEST_CASE("channel distance equal to the token positions reproduces the index form", "[positional][channel]") {
  for (const auto& v : nn::position_variants()) {
    if (!v.facts.distance_indexed) continue;
    for (const bool fused : {true, false})
      for (const int geo : {0, 1, 2}) {  // causal self, bidirectional self, cross with offsets and padding
        INFO(v.name << (fused ? " fused" : " reference") << " geometry " << geo);
        const bool causal = geo == 0, cross = geo == 2;
        std::map<std::string, std::string> params = v.facts.gradcheck_params;
        auto a = layer(v.name, "index", fused, params), b = layer(v.name, "time", fused, params);
        Generator g(3);
        Tensor xq = Tensor::rand({2, cross ? 3 : 6, 8}, g, DType::F64, -1, 1);
        Tensor xkv = Tensor::rand({2, 6, 8}, g, DType::F64, -1, 1);
        Tensor pad = Tensor::zeros({2, 6}, DType::F64);
        pad.select(0, 1).narrow(0, 4, 2).fill_(1.0);
        Tensor w = Tensor::randn({2, cross ? 3 : 6, 8}, g, DType::F64);
        auto run = [&](nn::MultiHeadAttention& m, const Tensor& positions) {
          Variable y =
              cross ? m.forward({.xq = Variable(xq),
                                 .xkv = Variable(xkv),
                                 .key_padding = pad,
                                 .q_offset = 7,
                                 .k_offset = 2,
                                 .positions = positions})
                    : m.forward({.xq = Variable(xq), .xkv = Variable(xq), .causal = causal, .positions = positions});
          sum(y * Variable(w)).backward();
          return y.data();
        };
        Tensor ya = run(*a, Tensor()), yb = run(*b, index_as_channel(2, 12));
        REQUIRE(allclose(ya, yb, 1e-12, 1e-12));
        auto pa = a->named_parameters(), pb = b->named_parameters();
        REQUIRE(pa.size() == pb.size());
        for (size_t i = 0; i < pa.size(); ++i) {
          INFO(pa[i].first);
          REQUIRE(pa[i].first == pb[i].first);
          const Tensor ga = pa[i].second.grad(), gb = pb[i].second.grad();
          REQUIRE(ga.defined() == gb.defined());
          if (ga.defined()) REQUIRE(allclose(ga, gb, 1e-10, 1e-12));
        }
      }
  }
}

namespace {
// The score bias [B, H, Lq, Lk] of an encoding with distances from `times` [B, L] (self-attention).
Tensor time_bias(const std::string& type, std::map<std::string, std::string> params, const std::vector<int64_t>& times,
                 int64_t L, bool causal, nn::PositionEncodingPtr* out = nullptr) {
  Generator gen(1);
  nn::PositionConfig pc;
  pc.type = type;
  pc.d_model = 8;
  pc.n_heads = 2;
  pc.head_dim = 4;
  pc.max_len = 32;
  pc.params = nn::PositionParams(std::move(params));
  pc.dtype = DType::F64;
  pc.channels = {"time"};
  pc.distance = "time";
  auto pos = nn::make_position_encoding(pc, gen);
  for (auto& [name, p] : pos->named_parameters())  // table[r, h] = r + h / 10
    if (name == "table") {
      std::vector<double> t(size_t(p.numel()));
      for (int64_t r = 0; r < p.size(0); ++r)
        for (int64_t h = 0; h < p.size(1); ++h) t[size_t(r * p.size(1) + h)] = double(r) + double(h) / 10;
      p.data().copy_(Tensor::from_vector(t, p.shape()));
    }
  if (out) *out = pos;
  const int64_t B = int64_t(times.size()) / L;
  nn::AttnGeometry g{.Lq = L, .Lk = L, .causal = causal};
  g.positions = Tensor::from_vector(times, {B, L, 1});
  nn::ChannelDistanceTerms t = nn::channel_distance_terms(*pos, g);
  if (!t.bias.table.defined()) return {};
  return permute(embedding(t.bias.table, t.bias.index), {0, 3, 1, 2}).data().contiguous();
}
}  // namespace

TEST_CASE("t5 with time distance: buckets of time differences (numpy golden)", "[positional][channel][golden]") {
  // numpy, HF T5Attention._relative_position_bucket (num_buckets 8, max_distance 20) of
  // d[i, j] = t[j] - t[i], t = 0 3 3 3 6 7 7 11 15 16
  const std::vector<int64_t> t = {0, 3, 3, 3, 6, 7, 7, 11, 15, 16};
  const std::vector<std::vector<int64_t>> bidir = {{0, 6, 6, 6, 6, 7, 7, 7, 7, 7}, {2, 0, 0, 0, 6, 6, 6, 7, 7, 7},
                                                   {2, 0, 0, 0, 6, 6, 6, 7, 7, 7}, {2, 0, 0, 0, 6, 6, 6, 7, 7, 7},
                                                   {2, 2, 2, 2, 0, 5, 5, 6, 7, 7}, {3, 2, 2, 2, 1, 0, 0, 6, 7, 7},
                                                   {3, 2, 2, 2, 1, 0, 0, 6, 7, 7}, {3, 3, 3, 3, 2, 2, 2, 0, 6, 6},
                                                   {3, 3, 3, 3, 3, 3, 3, 2, 0, 5}, {3, 3, 3, 3, 3, 3, 3, 2, 1, 0}};
  const std::vector<std::vector<int64_t>> causal = {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {3, 0, 0, 0, 0, 0, 0, 0, 0, 0},
                                                    {3, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {3, 0, 0, 0, 0, 0, 0, 0, 0, 0},
                                                    {5, 3, 3, 3, 0, 0, 0, 0, 0, 0}, {5, 4, 4, 4, 1, 0, 0, 0, 0, 0},
                                                    {5, 4, 4, 4, 1, 0, 0, 0, 0, 0}, {6, 5, 5, 5, 4, 4, 4, 0, 0, 0},
                                                    {7, 6, 6, 6, 6, 5, 5, 4, 0, 0}, {7, 6, 6, 6, 6, 6, 6, 4, 1, 0}};
  // a second example shifted by 1000: the same differences, the same buckets
  std::vector<int64_t> times = t;
  for (int64_t x : t) times.push_back(x + 1000);
  for (const bool is_causal : {false, true}) {
    const Tensor bias = time_bias("t5", {{"num_buckets", "8"}, {"max_distance", "20"}}, times, 10, is_causal);
    REQUIRE(bias.shape() == Shape{2, 2, 10, 10});
    const auto v = bias.to_vector<double>();
    const auto& want = is_causal ? causal : bidir;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < 10; ++i)
          for (int64_t j = 0; j < 10; ++j) {
            INFO("causal " << is_causal << " b " << b << " h " << h << " i " << i << " j " << j);
            REQUIRE(v[size_t(((b * 2 + h) * 10 + i) * 10 + j)] ==
                    Approx(double(want[size_t(i)][size_t(j)]) + h / 10.0));
          }
  }
}

TEST_CASE("alibi with time distance: -m_h |t_j - t_i| (hand values)", "[positional][channel][golden]") {
  // H = 2: slopes 2^-4, 2^-8 (Press et al.); t = 0 4 4 9
  const std::vector<int64_t> t = {0, 4, 4, 9};
  const Tensor bias = time_bias("alibi", {}, t, 4, false);
  const auto v = bias.to_vector<double>();
  const double m[2] = {1.0 / 16, 1.0 / 256};
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 4; ++j)
        REQUIRE(v[size_t((h * 4 + i) * 4 + j)] == Approx(-m[h] * double(std::abs(t[size_t(j)] - t[size_t(i)]))));
  // causal: m_h (t_j - t_i)
  const auto c = time_bias("alibi", {}, t, 4, true).to_vector<double>();
  REQUIRE(c[size_t(3 * 4 + 0)] == Approx(-9.0 / 16));
  REQUIRE(c[size_t(3 * 4 + 1)] == Approx(-5.0 / 16));
  REQUIRE(c[size_t(16 + 3 * 4 + 2)] == Approx(-5.0 / 256));
}

TEST_CASE("shaw and music_transformer with time distance: the row of each time difference",
          "[positional][channel][golden]") {
  const std::vector<int64_t> t = {0, 2, 2, 9};
  nn::AttnGeometry g{.Lq = 4, .Lk = 4};
  g.positions = Tensor::from_vector(t, {1, 4, 1});
  // shaw, k_max 3: clip(t_j - t_i, -3, 3) + 3
  nn::PositionEncodingPtr shaw;
  time_bias("shaw", {{"k_max", "3"}}, t, 4, false, &shaw);
  const auto rs = nn::channel_distance_terms(*shaw, g).rows.to_vector<int64_t>();
  REQUIRE(rs == std::vector<int64_t>{3, 5, 5, 6, 1, 3, 3, 6, 1, 3, 3, 6, 0, 0, 0, 3});
  // music_transformer, M = 4: t_j - t_i + 3 for |d| < 4, else 7 (the zero row)
  nn::PositionEncodingPtr mt;
  time_bias("music_transformer", {{"max_relative_position", "4"}}, t, 4, false, &mt);
  const auto terms = nn::channel_distance_terms(*mt, g);
  REQUIRE(terms.rows.to_vector<int64_t>() == std::vector<int64_t>{3, 5, 5, 7, 1, 3, 3, 7, 1, 3, 3, 7, 7, 7, 7, 3});
  REQUIRE(terms.keys.shape() == Shape{2, 8, 4});  // [H, 2M, dh]: the table and its zero row
  for (double x : terms.keys.data().narrow(1, 7, 1).contiguous().to_vector<double>()) REQUIRE(x == 0.0);
}

TEST_CASE("relpos bias --times: T5 buckets of time differences (the numpy golden's causal rows)",
          "[positional][channel][golden]") {
  inspect::BiasRequest req;
  req.type = "t5";
  req.heads = 1;
  req.causal = true;
  req.identity_table = true;  // row r holds r: the bias is the bucket
  req.params = {{"num_buckets", "8"}, {"max_distance", "20"}};
  req.times = {0, 3, 3, 3, 6, 7, 7, 11, 15, 16};
  req.lq = req.lk = 10;
  const auto r = inspect::position_bias(req);
  REQUIRE(r.bias.size() == 100);
  const std::vector<double> row9 = {7, 6, 6, 6, 6, 6, 6, 4, 1, 0}, row4 = {5, 3, 3, 3, 0};
  for (size_t j = 0; j < 10; ++j) REQUIRE(r.bias[90 + j] == row9[j]);
  for (size_t j = 0; j < 5; ++j) REQUIRE(r.bias[40 + j] == row4[j]);
}

TEST_CASE("position.distance: a channel is refused where it cannot apply", "[positional][channel][config]") {
  Generator gen(1);
  nn::PositionConfig pc;
  pc.d_model = 8;
  pc.n_heads = 2;
  pc.head_dim = 4;
  pc.max_len = 16;
  pc.distance = "time";
  pc.channels = {"time"};
  pc.type = "rope";
  REQUIRE_THROWS_WITH(
      nn::make_position_encoding(pc, gen),
      Contains(
          "position 'rope': model.position.distance 'time' needs an encoding that is a function of the distance") &&
          Contains("t5") && Contains("music_transformer"));
  pc.type = "t5";
  pc.channels = {"beat"};
  REQUIRE_THROWS_WITH(nn::make_position_encoding(pc, gen),
                      Contains("position 't5' reads the per-token position channel 'time', but "
                               "data.position_channels lists [beat]"));
  pc.channels = {};
  REQUIRE_THROWS_WITH(nn::make_position_encoding(pc, gen), Contains("data.position_channels lists none"));
  // the attention layer without the channel's values
  pc.channels = {"time"};
  nn::AttentionConfig ac;
  ac.d_model = 8;
  ac.n_heads = 2;
  nn::MultiHeadAttention attn(ac, nn::make_position_encoding(pc, gen), true, gen);
  Variable x(Tensor::zeros({1, 3, 8}));
  REQUIRE_THROWS_WITH(attn.forward({.xq = x, .xkv = x, .causal = true}), Contains("got no position channels"));
  REQUIRE_THROWS_WITH(
      attn.forward({.xq = x, .xkv = x, .causal = true, .positions = Tensor::zeros({1, 2, 1}, DType::I64)}),
      Contains("are not all among the 2 tokens"));
}
