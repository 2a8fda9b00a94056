// 2D token grids (nn/positional/grid.h) and the encodings that read them: cpe (the PEG
// convolution after block 0), learned and relative_2d served on a grid other than the training
// one (bicubic resize). Goldens of the resize come from PyTorch: F.interpolate(mode="bicubic",
// align_corners=False) of unit images (Debian python3-torch, float64); the whole-model parity of
// cpe and of both resizes is tests/nn/test_model_trajectory.cpp (fixtures cpe,
// relative_2d_resize, learned_resize).
#include <catch2/catch.hpp>

#include "autograd/ops.h"
#include "nn/positional/grid.h"
#include "nn/positional/registry.h"

using namespace relpos;
using Catch::Contains;

namespace {

// positions [B, L, 2] (row, col) of B examples, each an h x w grid, then `pad` padding tokens.
nn::StackInput grid_input(int64_t B, int64_t h, int64_t w, int64_t pad = 0) {
  const int64_t L = h * w + pad;
  std::vector<int64_t> p(size_t(B * L * 2), 0);
  std::vector<double> m(size_t(B * L), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t) {
      if (t >= h * w) {
        m[size_t(b * L + t)] = 1.0;
        continue;
      }
      p[size_t((b * L + t) * 2)] = t / w;
      p[size_t((b * L + t) * 2 + 1)] = t % w;
    }
  return {Tensor::from_vector(p, {B, L, 2}), pad > 0 ? Tensor::from_vector(m, {B, L}) : Tensor(), 0};
}

nn::PositionEncodingPtr make(const std::string& type, std::map<std::string, std::string> params,
                             std::vector<std::string> channels = {"row", "col"}, int64_t d_model = 4) {
  nn::PositionConfig pc;
  pc.type = type;
  pc.d_model = d_model;
  pc.n_heads = 2;
  pc.head_dim = d_model / 2;
  pc.max_len = 256;
  pc.params = nn::PositionParams(params);
  pc.dtype = DType::F64;
  pc.channels = std::move(channels);
  Generator g(5);
  return nn::make_position_encoding(pc, g);
}

Variable param(const nn::Module& m, const std::string& name) {
  for (auto& [n, p] : m.named_parameters())
    if (n == name) return p;
  FAIL("no parameter " << name);
  return {};
}

}  // namespace

TEST_CASE("grid: bicubic_matrix equals PyTorch's F.interpolate(bicubic, align_corners=False)", "[nn][grid]") {
  // torch: F.interpolate(eye(n_in).reshape(n_in, 1, 1, n_in), size=(1, n_out), mode="bicubic").
  // By hand, row 0 of (5 <- 3): x = 0.5 * 3/5 - 0.5 = -0.2, t = 0.8, taps at -2..1 clamped to 0,0,0,1;
  // the weight of input 1 is cubic2(1.2) = ((A 1.2 - 5A) 1.2 + 8A) 1.2 - 4A = -0.096 (A = -0.75).
  const std::vector<double> m53 = {1.096, -0.096, 0.0, 0.612, 0.46, -0.072, 0.0, 1.0, 0.0, -0.072, 0.46, 0.612,
                                   0.0,   -0.096, 1.096};
  const std::vector<double> m24 = {0.5, 0.59375, -0.09375, 0.0, 0.0, -0.09375, 0.59375, 0.5};
  for (auto [no, ni, want] : {std::tuple{5, 3, m53}, std::tuple{2, 4, m24}}) {
    const std::vector<double> got = nn::bicubic_matrix(no, ni, DType::F64).to_vector<double>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-12));
  }
  // Equal sizes: the identity; every row sums to 1 (a constant image stays constant).
  const std::vector<double> id = nn::bicubic_matrix(4, 4, DType::F64).to_vector<double>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) CHECK(id[size_t(i * 4 + j)] == (i == j ? 1.0 : 0.0));
  const std::vector<double> up = nn::bicubic_matrix(31, 15, DType::F64).to_vector<double>();
  for (int64_t i = 0; i < 31; ++i) {
    double s = 0;
    for (int64_t j = 0; j < 15; ++j) s += up[size_t(i * 15 + j)];
    CHECK(s == Approx(1.0).margin(1e-12));
  }
}

TEST_CASE("grid: batch_grid reads H x W and refuses bad grids naming the batch row, token and channel", "[nn][grid]") {
  const nn::GridChannels ch{0, 1};
  const nn::StackInput ok = grid_input(2, 3, 4, 2);
  CHECK(nn::batch_grid(ok.positions, ch, ok.padding, "t") == nn::Grid{3, 4});
  auto with = [&](int64_t b, int64_t t, int64_t c, int64_t v) {
    Tensor p = grid_input(2, 3, 4).positions.clone();
    std::vector<int64_t> x = p.to_vector<int64_t>();
    x[size_t((b * 12 + t) * 2 + c)] = v;
    return Tensor::from_vector(x, {2, 12, 2});
  };
  CHECK_THROWS_WITH(nn::batch_grid(with(1, 5, 0, -1), ch, Tensor(), "position 'cpe'"),
                    Contains("position 'cpe': batch row 1, token 5: channel 'row' is -1, below 0"));
  CHECK_THROWS_WITH(nn::batch_grid(with(0, 4, 1, 2), ch, Tensor(), "t"),
                    Contains("batch row 0, token 4: channel 'col' is 2, expected 0"));
  // A coordinate past the grid: the example no longer fills its grid (12 tokens, a 4x4 reach).
  CHECK_THROWS_WITH(nn::batch_grid(with(1, 11, 0, 3), ch, Tensor(), "t"),
                    Contains("batch row 1 has 12 tokens, but its channels 'row' and 'col' reach a 4x4 grid of 16"));
  // Two grid sizes in one batch (a 3x4 example beside a 2x6 one).
  std::vector<int64_t> mixed = grid_input(1, 3, 4).positions.to_vector<int64_t>();
  const std::vector<int64_t> other = grid_input(1, 2, 6).positions.to_vector<int64_t>();
  mixed.insert(mixed.end(), other.begin(), other.end());
  CHECK_THROWS_WITH(nn::batch_grid(Tensor::from_vector(mixed, {2, 12, 2}), ch, Tensor(), "t"),
                    Contains("batch row 0 is a 3x4 grid and batch row 1 a 2x6 grid: one batch holds one grid size"));
  // Padding before a real token.
  std::vector<double> pad(24, 0.0);
  pad[3] = 1.0;
  CHECK_THROWS_WITH(nn::batch_grid(grid_input(2, 3, 4).positions, ch, Tensor::from_vector(pad, {2, 12}), "t"),
                    Contains("batch row 0: token 3 is padding but token 4 is not"));
}

TEST_CASE("cpe: x + depthwise conv after block 0 only, padding untouched, missing channels named", "[nn][grid]") {
  auto pos = make("cpe", {{"kernel", "1"}});
  CHECK(pos->type() == "cpe");
  CHECK(pos->is_absolute());
  // kernel 1: the convolution scales channel c by w[c] and adds b[c].
  param(*pos, "conv_weight").data().copy_(Tensor::from_vector(std::vector<double>{2, -1, 0.5, 0}, {4, 1, 1}));
  param(*pos, "conv_bias").data().copy_(Tensor::from_vector(std::vector<double>{1, 0, -2, 3}, {4}));
  Generator g(3);
  const nn::StackInput in = grid_input(2, 2, 3, 2);
  Variable x(Tensor::rand({2, 8, 4}, g, DType::F64, -1, 1));
  const std::vector<double> xv = x.data().to_vector<double>();
  const std::vector<double> y0 = pos->after_block(x, 0, in).data().to_vector<double>();
  const double w[4] = {2, -1, 0.5, 0}, bias[4] = {1, 0, -2, 3};
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 8; ++t)
      for (int64_t c = 0; c < 4; ++c) {
        const size_t e = size_t((b * 8 + t) * 4 + c);
        CHECK(y0[e] == Approx(t < 6 ? xv[e] * (1 + w[c]) + bias[c] : xv[e]).margin(1e-12));
      }
  CHECK(pos->after_block(x, 1, in).data().to_vector<double>() == xv);  // only after block 0
  CHECK(pos->embed_input(x, in).data().to_vector<double>() == xv);     // nothing at the input
  CHECK_THROWS_WITH(pos->after_block(x, 0, {}), Contains("position 'cpe' reads the token grid from the position "
                                                         "channels 'row' and 'col'"));
  CHECK_THROWS_WITH(make("cpe", {}, {"time"}), Contains("reads the per-token position channel 'row'"));
  auto blind = make("cpe", {}, {});
  CHECK_THROWS_WITH(blind->after_block(x, 0, in), Contains("list them in data.position_channels"));
  CHECK_THROWS_WITH(make("cpe", {{"kernel", "2"}}), Contains("kernel must be odd"));
}

TEST_CASE("cpe: a 3x3 kernel sees exactly its 8 neighbours, zero padding at the border", "[nn][grid]") {
  // One channel, all weights 1, bias 0, x = 1 everywhere: the added term counts each token's
  // in-grid 3x3 neighbourhood (corners 4, edges 6, interior 9) — how zero padding tells position.
  auto pos = make("cpe", {}, {"row", "col"}, 2);
  param(*pos, "conv_weight").data().fill_(1.0);
  param(*pos, "conv_bias").data().fill_(0.0);
  const nn::StackInput in = grid_input(1, 3, 4);
  const std::vector<double> y =
      pos->after_block(Variable(Tensor::ones({1, 12, 2}, DType::F64)), 0, in).data().to_vector<double>();
  const int want[12] = {4, 6, 6, 4, 6, 9, 9, 6, 4, 6, 6, 4};
  for (int t = 0; t < 12; ++t) CHECK(y[size_t(t * 2)] == 1.0 + want[t]);
}

TEST_CASE("grid: learned and relative_2d serve another grid by resizing their tables", "[nn][grid]") {
  // learned, trained on 2x2: on its own grid the rows of the table as before; on 3x3 a constant
  // table stays constant (bicubic rows sum to 1), on a grid without channels the plain rows.
  auto learned = make("learned", {{"grid_h", "2"}, {"grid_w", "2"}});
  Variable table = param(*learned, "table");
  Generator g(4);
  Variable x(Tensor::rand({1, 4, 4}, g, DType::F64, -1, 1));
  CHECK(learned->embed_input(x, grid_input(1, 2, 2)).data().to_vector<double>() ==
        learned->embed(x, 0).data().to_vector<double>());
  table.data().fill_(0.25);
  Variable x9(Tensor::zeros({1, 9, 4}, DType::F64));
  for (double v : learned->embed_input(x9, grid_input(1, 3, 3)).data().to_vector<double>())
    CHECK(v == Approx(0.25).margin(1e-12));
  CHECK_THROWS_WITH(make("learned", {{"grid_h", "2"}}), Contains("both 0 (no grid) or both >= 1"));
  CHECK_THROWS_WITH(make("learned", {{"grid_h", "20"}, {"grid_w", "20"}}), Contains("needs 400 table rows"));

  // relative_2d on 2x3: the batch's own grid uses the table as is; a 3x4 batch gets the table
  // resized to (2*3-1) x (2*4-1) rows and that grid's index.
  auto rel = make("relative_2d", {{"grid_h", "2"}, {"grid_w", "3"}});
  nn::AttnGeometry same{6, 6, 0, 0, false};
  same.positions = grid_input(1, 2, 3).positions;
  CHECK(rel->index_bias(same).table.size(0) == 3 * 5);
  nn::AttnGeometry big{12, 12, 0, 0, false};
  big.positions = grid_input(1, 3, 4).positions;
  param(*rel, "table").data().fill_(-0.5);
  const nn::PositionEncoding::IndexBias ib = rel->index_bias(big);
  CHECK(ib.table.size(0) == 5 * 7);
  CHECK(ib.table.size(1) == 2);
  for (double v : ib.table.data().to_vector<double>()) CHECK(v == Approx(-0.5).margin(1e-12));
  const std::vector<int64_t> idx = ib.index.to_vector<int64_t>();
  CHECK(idx[0] == (0 + 2) * 7 + (0 + 3));  // token 0 with itself: offset (0, 0)
  CHECK(idx[11] == (0 - 2 + 2) * 7 + (0 - 3 + 3));  // token 0 to token 11 at (2, 3): dh = -2, dw = -3
}
