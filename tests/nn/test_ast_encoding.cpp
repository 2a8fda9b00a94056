// The `ast` encoding (nn/positional/ast.cpp): golden biases worked by hand from the formula
//   bias[b, h, i, j] = updown[min(up, K) (K + 1) + min(down, K), h] + path[min(up + down, S), h]
//                      (+ seq[t5_bucket(j - i), h] with seq_buckets)
// on hand-drawn trees, with tables set to values that make every term readable; the index the
// fused kernel gathers equals the materialised bias; and the refusals (no channel, no tree, a
// negative parent, bad parameters) are clear errors.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "nn/positional/registry.h"

using namespace relpos;
using Catch::Matchers::Contains;

namespace {

nn::PositionEncodingPtr make_ast(std::map<std::string, std::string> params, std::vector<std::string> channels = {"parent"}) {
  nn::PositionConfig pc;
  pc.type = "ast";
  pc.d_model = 8;
  pc.n_heads = 2;
  pc.head_dim = 4;
  pc.max_len = 16;
  pc.params = nn::PositionParams(std::move(params));
  pc.dtype = DType::F64;
  pc.channels = std::move(channels);
  Generator gen(3);
  return nn::make_position_encoding(pc, gen);
}

// Sets table[r, h] = f(r, h) for the parameter named `name`.
template <typename F>
void fill(const nn::PositionEncoding& pos, const std::string& name, F f) {
  for (const auto& [n, p] : pos.named_parameters())
    if (n == name) {
      std::vector<double> v(size_t(p.numel()));
      for (int64_t r = 0; r < p.size(0); ++r)
        for (int64_t h = 0; h < p.size(1); ++h) v[size_t(r * p.size(1) + h)] = f(r, h);
      p.data().copy_(Tensor::from_vector(v, p.shape()));
      return;
    }
  FAIL("no parameter " << name);
}

// positions [1, L, 1] from a parent column.
Tensor positions(const std::vector<int64_t>& parent) {
  return Tensor::from_vector(parent, {1, int64_t(parent.size()), 1});
}

}  // namespace

TEST_CASE("ast: golden biases of a hand-drawn tree (K = 2, S = 3)", "[positional][golden][ast]") {
  auto pos = make_ast({{"max_steps", "2"}, {"max_path", "3"}});
  // updown[r, h] = r + 10 h, path[s, h] = 100 s + 1000 h: bias = (3 u + d) + 100 s + 1010 h.
  fill(*pos, "updown", [](int64_t r, int64_t h) { return double(r + 10 * h); });
  fill(*pos, "path", [](int64_t s, int64_t h) { return double(100 * s + 1000 * h); });
  // A chain 0 <- 1 <- 2 <- 3 <- 4 (window depths 1..5) and a second root 5.
  nn::AttnGeometry g{6, 6, 0, 0, true};
  g.positions = positions({0, 1, 1, 1, 1, 0});
  NoGradGuard ng;
  const Variable sb = pos->score_bias(g);  // [1, H, 6, 6], the materialised path
  REQUIRE(sb.dim() == 4);
  const auto v = sb.data().to_vector<double>();
  auto at = [&](int64_t h, int64_t i, int64_t j) { return v[size_t((h * 6 + i) * 6 + j)]; };
  struct Case {
    int64_t i, j;
    double want;  // head 0, by hand: u, d clipped at 2, s = min(u + d, 3)
  };
  const std::vector<Case> cases = {
      {4, 4, 0},                 // u 0 d 0 s 0
      {4, 3, 3 * 1 + 0 + 100},   // 4 -> its parent 3: u 1 d 0 s 1
      {4, 2, 3 * 2 + 0 + 200},   // u 2 d 0 s 2
      {4, 0, 3 * 2 + 0 + 300},   // u 4 -> 2, d 0, s 4 -> 3
      {5, 4, 3 * 1 + 2 + 300},   // 5 (root) -> 4: up 1 to the virtual root, down 5 -> 2, s 6 -> 3
      {5, 0, 3 * 1 + 1 + 200},   // 5 -> 0: u 1 d 1 s 2
      {3, 1, 3 * 2 + 0 + 200},   // u 2 d 0
  };
  for (const Case& c : cases) {
    INFO("query " << c.i << " key " << c.j);
    CHECK(at(0, c.i, c.j) == c.want);
    CHECK(at(1, c.i, c.j) == c.want + 1010);
  }
  // Bidirectional: a key below the query's node: 1 -> 4 is u 0 d 3 -> 2, s 3.
  nn::AttnGeometry gb{6, 6, 0, 0, false};
  gb.positions = g.positions;
  const auto vb = pos->score_bias(gb).data().to_vector<double>();
  CHECK(vb[size_t(1 * 6 + 4)] == 0 * 3 + 2 + 300);
  CHECK(vb[size_t(4 * 6 + 1)] == 2 * 3 + 0 + 300);
}

TEST_CASE("ast: seq_buckets adds a T5-bucketed sequential bias (the 'both' configuration)", "[positional][golden][ast]") {
  auto pos = make_ast({{"max_steps", "2"}, {"max_path", "3"}, {"seq_buckets", "4"}, {"seq_max_distance", "8"}});
  fill(*pos, "updown", [](int64_t, int64_t) { return 0.0; });
  fill(*pos, "path", [](int64_t, int64_t) { return 0.0; });
  fill(*pos, "seq", [](int64_t b, int64_t h) { return double(b + 10 * h); });
  nn::AttnGeometry g{6, 6, 0, 0, true};
  g.positions = positions({0, 1, 1, 1, 1, 0});
  NoGradGuard ng;
  const Variable tb = pos->toeplitz_bias(g);  // [H, 11], entry t <-> kj - qi = t - 5
  REQUIRE(tb.defined());
  const auto v = tb.data().to_vector<double>();
  // causal T5 buckets, 4 buckets, max_distance 8 (by hand): q - k = 0 -> 0, 1 -> 1, 2 -> 2
  // (2 + int(log(1) / log(4) * 2)), 3 -> 2 (2 + int(0.58)), 4 -> 3 (2 + int(1.0)), 5 -> 3
  const std::vector<double> back = {0, 1, 2, 2, 3, 3};
  for (int64_t d = 0; d <= 5; ++d) {
    CHECK(v[size_t(5 - d)] == back[size_t(d)]);
    CHECK(v[size_t(11 + 5 - d)] == back[size_t(d)] + 10);
  }
}

TEST_CASE("ast: the index the fused kernel gathers is the materialised bias", "[positional][ast]") {
  auto pos = make_ast({{"max_steps", "3"}, {"max_path", "5"}});
  nn::AttnGeometry g{5, 7, 2, 0, false};  // queries 2..6, keys 0..6 of a 7-token window, 2 rows
  g.positions = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 1, 1, 0, 1, 3, 0, 1, 2, 1, 1, 4}, {2, 7, 1});
  NoGradGuard ng;
  const auto ib = pos->index_bias(g);
  REQUIRE(ib.index.dim() == 3);
  const auto idx = ib.index.to_vector<int64_t>();
  const auto table = ib.table.data().to_vector<double>();
  const auto sb = pos->score_bias(g).data().to_vector<double>();  // [2, H, 5, 7]
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < 5; ++i)
        for (int64_t j = 0; j < 7; ++j)
          REQUIRE(sb[size_t(((b * 2 + h) * 5 + i) * 7 + j)] == table[size_t(idx[size_t((b * 5 + i) * 7 + j)] * 2 + h)]);
}

TEST_CASE("ast: refusals name what is missing", "[positional][ast][hostile]") {
  CHECK_THROWS_WITH(make_ast({}, {}), Contains("position 'ast' reads the per-token position channel 'parent', but "
                                                "data.position_channels lists none"));
  CHECK_THROWS_WITH(make_ast({}, {"depth"}), Contains("data.position_channels lists [depth]"));
  CHECK_THROWS_WITH(make_ast({{"seq_buckets", "3"}}), Contains("seq_buckets must be 0"));
  CHECK_THROWS_WITH(make_ast({{"max_steps", "100"}, {"max_path", "100"}}), Contains("more than 65536"));
  auto pos = make_ast({}, {"depth", "parent"});
  nn::AttnGeometry g{4, 4, 0, 0, true};
  CHECK_THROWS_WITH(pos->index_bias(g), Contains("cannot sample"));
  g.positions = Tensor::from_vector(std::vector<int64_t>{0, 0, 1, 1, 2, -3, 3, 1}, {1, 4, 2});
  CHECK_THROWS_WITH(pos->index_bias(g), Contains("'parent' channel of batch row 0, token 2: parent channel value -3"));
  // A decoding step past the tokens whose tree the batch carries (what `relpos sample` does).
  nn::AttnGeometry step{1, 5, 4, 0, true};
  step.positions = Tensor::from_vector(std::vector<int64_t>{0, 0, 1, 1, 2, 1, 3, 1}, {1, 4, 2});
  CHECK_THROWS_WITH(pos->index_bias(step), Contains("lie outside the 4 tokens whose tree the batch carries"));
}
