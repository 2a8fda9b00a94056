// Golden values of the position encodings, from the reference formulas (values taken from
// the reference implementations' published tables, not from relpos).
#include <fmt/format.h>

#include <array>
#include <catch2/catch.hpp>
#include <cmath>

#include "../helpers.h"
#include "attention_fixture.h"
#include "nn/positional/alibi_slopes.h"
#include "nn/positional/rope_freqs.h"
#include "nn/positional/t5_bucket.h"

using namespace relpos;
using Catch::Contains;

TEST_CASE("t5 buckets match HF _relative_position_bucket (32 buckets, max distance 128)", "[positional][golden]") {
  const std::vector<int64_t> rel = {-200, -130, -20, -8, -1, 0, 1, 7, 8, 20, 130, 200};
  const std::vector<int64_t> bidir = {15, 15, 10, 8, 1, 0, 17, 23, 24, 26, 31, 31};
  const std::vector<int64_t> causal = {31, 31, 17, 8, 1, 0, 0, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < rel.size(); ++i) {
    INFO("rel " << rel[i]);
    REQUIRE(nn::t5_bucket(rel[i], true) == bidir[i]);
    REQUIRE(nn::t5_bucket(rel[i], false) == causal[i]);
  }
}

TEST_CASE("t5 buckets: full maps by distance, saturation at 91 (bidirectional) and 113 (causal)", "[positional][golden]") {
  // bidirectional, by |rel| (rel < 0): 0..7 exact; 8..11->8, 12..15->9, 16..22->10, 23..31->11,
  // 32..45->12, 46..63->13, 64..90->14, >=91->15
  const std::vector<std::pair<int64_t, int64_t>> bidir_edges = {
      {8, 8}, {11, 8}, {12, 9}, {15, 9}, {16, 10}, {22, 10}, {23, 11}, {31, 11}, {32, 12},
      {45, 12}, {46, 13}, {63, 13}, {64, 14}, {90, 14}, {91, 15}, {1000, 15}};
  for (auto [d, b] : bidir_edges) {
    INFO("|rel| " << d);
    REQUIRE(nn::t5_bucket(-d, true) == b);
    REQUIRE(nn::t5_bucket(d, true) == b + 16);
  }
  // causal (d = q - k): 0..15 exact; 16..18->16, ..., 99..112->30, >=113->31
  const std::vector<std::pair<int64_t, int64_t>> causal_edges = {
      {15, 15}, {16, 16}, {18, 16}, {19, 17}, {20, 17}, {21, 18}, {46, 24}, {51, 24}, {99, 30}, {112, 30}, {113, 31}};
  for (auto [d, b] : causal_edges) {
    INFO("q - k = " << d);
    REQUIRE(nn::t5_bucket(-d, false) == b);
  }
}

TEST_CASE("t5 bias with a KV-cache offset uses absolute query positions", "[positional][golden]") {
  // decoding step: 5 cached keys, the query at absolute position 5, keys 0..5 -> rel -5..0
  auto s = test::make_attention("t5");
  nn::AttnGeometry g{1, 6, 5, 0, true};
  REQUIRE(s.attn->position()->bias_index(g).to_vector<int64_t>() == std::vector<int64_t>{5, 4, 3, 2, 1, 0});
}

TEST_CASE("alibi slopes: reference algorithm for 8 and 12 heads", "[positional][golden]") {
  std::vector<double> s8 = nn::alibi_slopes(8);
  for (int h = 0; h < 8; ++h) REQUIRE(s8[size_t(h)] == Approx(std::pow(2.0, -(h + 1))).epsilon(1e-15));
  std::vector<double> s12 = nn::alibi_slopes(12);
  std::vector<double> want;
  for (int h = 1; h <= 8; ++h) want.push_back(std::pow(2.0, -h));
  for (double e : {-0.5, -1.5, -2.5, -3.5}) want.push_back(std::pow(2.0, e));
  REQUIRE(s12.size() == 12);
  for (size_t h = 0; h < 12; ++h) {
    INFO("head " << h);
    REQUIRE(s12[h] == Approx(want[h]).epsilon(1e-15));
  }
  REQUIRE(nn::alibi_slopes(1) == std::vector<double>{std::pow(2.0, -8.0)});
  REQUIRE(nn::alibi_slopes(6).size() == 6);
}

TEST_CASE("alibi bias: causal -m(i-j) and symmetric -m|i-j| forms", "[positional][golden]") {
  auto s = test::make_attention("alibi", {}, 2, 8);
  // Lq = 2, Lk = 3: Toeplitz entries are distances kj - qi = -1, 0, 1, 2
  Tensor causal = s.attn->position()->toeplitz_bias({2, 3, 0, 0, true}).data();
  Tensor bidir = s.attn->position()->toeplitz_bias({2, 3, 0, 0, false}).data();
  // slopes for 2 heads: 2^-4, 2^-8
  const double m0 = std::pow(2.0, -4), m1 = std::pow(2.0, -8);
  REQUIRE(causal.to_vector<double>() == std::vector<double>{-m0, 0, m0, 2 * m0, -m1, 0, m1, 2 * m1});
  REQUIRE(bidir.to_vector<double>() == std::vector<double>{-m0, 0, -m0, -2 * m0, -m1, 0, -m1, -2 * m1});
}

TEST_CASE("rope: q.k depends only on the distance (shift both positions)", "[positional][golden]") {
  for (std::string style : {"half", "interleaved"})
    for (std::string scaling : {"none", "linear", "ntk", "yarn"}) {
      auto s = test::make_attention("rope", {{"style", style}, {"scaling", scaling}, {"factor", "2"},
                                             {"original_max_len", "16"}, {"fraction", "0.5"}},
                                    1, 8);
      auto pos = s.attn->position();
      Variable q = test::rand_var({1, 1, 1, 8}, 1, -1, 1, false);
      Variable kk = test::rand_var({1, 1, 1, 8}, 2, -1, 1, false);
      auto score = [&](int64_t m, int64_t n) {
        return sum(pos->rotate(q, m) * pos->rotate(kk, n)).item();
      };
      INFO(style << " " << scaling);
      for (int64_t m : {3, 10, 100}) REQUIRE(score(m, m - 3) == Approx(score(3, 0)).epsilon(1e-10));
      REQUIRE(std::abs(score(3, 0) - score(4, 0)) > 1e-6);  // and it does depend on the distance
    }
}

TEST_CASE("rope: rotate-half and interleaved differ by a channel permutation", "[positional][golden]") {
  auto half = test::make_attention("rope", {{"style", "half"}}, 1, 8).attn->position();
  auto inter = test::make_attention("rope", {{"style", "interleaved"}}, 1, 8).attn->position();
  Variable x = test::rand_var({1, 1, 3, 8}, 3, -1, 1, false);
  // interleaved pair (2p, 2p+1) <-> half pair (p, p + 4): permute x, rotate, permute back
  std::vector<int64_t> perm = {0, 2, 4, 6, 1, 3, 5, 7};  // half channel c takes x[perm[c]]
  Tensor idx = Tensor::from_vector(perm, {8});
  Tensor a = index_select(half->rotate(index_select(x, -1, idx), 7), -1, Tensor::from_vector(std::vector<int64_t>{0, 4, 1, 5, 2, 6, 3, 7}, {8})).data();
  Tensor b = inter->rotate(x, 7).data();
  REQUIRE(test::allclose(a, b, 1e-12, 1e-14));
}

TEST_CASE("rope scaling: YaRN ramp and attention factor (dim 128, base 1e4, factor 4, L0 4096)", "[positional][golden]") {
  nn::RopeSettings s;
  s.rot_dim = 128;
  s.scaling = "yarn";
  s.factor = 4;
  s.original_max_len = 4096;
  nn::RopeFrequencies f = nn::rope_frequencies(s);
  REQUIRE(f.mscale == Approx(1.138629).epsilon(1e-6));
  int kept = 0, divided = 0, blended = 0;
  for (int64_t p = 0; p < 64; ++p) {
    double w = std::pow(1e4, -2.0 * double(p) / 128.0);
    if (f.inv_freq[size_t(p)] == w) ++kept;
    else if (std::abs(f.inv_freq[size_t(p)] - w / 4) < 1e-18) ++divided;
    else ++blended;
  }
  REQUIRE(kept == 21);
  REQUIRE(divided == 18);
  REQUIRE(blended == 25);
  // linear: inv_freq / factor; ntk: base * factor^(d/(d-2))
  s.scaling = "linear";
  REQUIRE(nn::rope_frequencies(s).inv_freq[1] == Approx(std::pow(1e4, -2.0 / 128) / 4));
  s.scaling = "ntk";
  REQUIRE(nn::rope_frequencies(s).inv_freq[1] == Approx(std::pow(1e4 * std::pow(4.0, 128.0 / 126.0), -2.0 / 128)));
}

TEST_CASE("shaw index: clip(k - q, -k_max, k_max) + k_max, aligned by absolute positions", "[positional][golden]") {
  auto s = test::make_attention("shaw", {{"k_max", "3"}});
  // tensor2tensor example: q = 2 queries aligned to the last of 5 keys, max 3
  nn::AttnGeometry g{2, 5, 3, 0, false};
  REQUIRE(s.attn->position()->bias_index(g).to_vector<int64_t>() ==
          std::vector<int64_t>{0, 1, 2, 3, 4, 0, 0, 1, 2, 3});
}

TEST_CASE("position registry: unknown names and parameters are clear errors", "[positional]") {
  REQUIRE_THROWS_WITH(test::make_attention("alibj"), Contains("'alibj'") && Contains("did you mean 'alibi'"));
  REQUIRE_THROWS_WITH(test::make_attention("t5", {{"num_bucket", "32"}}),
                      Contains("num_bucket") && Contains("did you mean 'num_buckets'"));
  REQUIRE_THROWS_WITH(test::make_attention("t5", {{"num_buckets", "abc"}}), Contains("not an integer"));
  REQUIRE_THROWS_WITH(test::make_attention("rope", {{"style", "diagonal"}}), Contains("half, interleaved"));
}

TEST_CASE("sinusoidal: PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(...), offsets respected", "[positional][golden]") {
  auto s = test::make_attention("sinusoidal", {}, 2, 8);
  Variable zeros(Tensor::zeros({1, 3, 8}, DType::F64));
  Tensor pe = s.attn->position()->embed(zeros, 5).data();  // positions 5, 6, 7
  for (int64_t p = 0; p < 3; ++p)
    for (int64_t i = 0; i < 4; ++i) {
      const double ang = double(5 + p) / std::pow(10000.0, 2.0 * double(i) / 8.0);
      REQUIRE(pe.at({0, p, 2 * i}) == Approx(std::sin(ang)).epsilon(1e-12));
      REQUIRE(pe.at({0, p, 2 * i + 1}) == Approx(std::cos(ang)).epsilon(1e-12));
    }
  REQUIRE(pe.at({0, 0, 0}) == Approx(std::sin(5.0)).epsilon(1e-12));  // hand value: sin(5) = -0.9589
}

TEST_CASE("music_transformer: score term q_i . E[h, M - 1 + kj - qi], zero beyond M (t2t), any geometry",
          "[positional][golden]") {
  // The skewed q @ E^T against the formula evaluated here per (h, i, j), with table entries
  // E[h, r, c] = 0.1 (h + 1) + 0.01 r - 0.003 c and q[b, h, i, c] = sin(1 + b + 2h + 3i + 5c).
  const int64_t H = 2, dh = 3, M = 3;
  for (bool share : {false, true})
    for (auto [Lq, Lk, qo, ko] : std::vector<std::array<int64_t, 4>>{{4, 4, 0, 0}, {2, 5, 3, 0}, {3, 2, 0, 4}}) {
      Generator gen(0);
      nn::PositionConfig pc;
      pc.type = "music_transformer";
      pc.n_heads = H;
      pc.head_dim = dh;
      pc.d_model = H * dh;
      pc.max_len = 16;
      pc.dtype = DType::F64;
      pc.params =
          nn::PositionParams({{"max_relative_position", std::to_string(M)}, {"heads_share", share ? "true" : "false"}});
      auto pos = nn::make_position_encoding(pc, gen);
      const int64_t th = share ? 1 : H;
      Variable table = pos->named_parameters().at(0).second;
      REQUIRE(table.shape() == Shape{th, 2 * M - 1, dh});
      auto E = [&](int64_t h, int64_t r, int64_t c) {
        return 0.1 * double(h + 1) + 0.01 * double(r) - 0.003 * double(c);
      };
      std::vector<double> ev;
      for (int64_t h = 0; h < th; ++h)
        for (int64_t r = 0; r < 2 * M - 1; ++r)
          for (int64_t c = 0; c < dh; ++c) ev.push_back(E(h, r, c));
      table.data().copy_(Tensor::from_vector(ev, table.shape()));
      const int64_t B = 2;
      auto qv = [](int64_t b, int64_t h, int64_t i, int64_t c) {
        return std::sin(double(1 + b + 2 * h + 3 * i + 5 * c));
      };
      std::vector<double> q;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < Lq; ++i)
            for (int64_t c = 0; c < dh; ++c) q.push_back(qv(b, h, i, c));
      nn::AttnGeometry g{Lq, Lk, qo, ko, false};
      Variable k(Tensor::zeros({B, H, Lk, dh}, DType::F64));
      const auto got = pos->score_terms(Variable(Tensor::from_vector(q, {B, H, Lq, dh})), k, g)
                           .data()
                           .contiguous()
                           .to_vector<double>();
      REQUIRE(got.size() == size_t(B * H * Lq * Lk));
      std::string bad;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < Lq; ++i)
            for (int64_t j = 0; j < Lk; ++j) {
              const int64_t d = (ko + j) - (qo + i);
              double want = 0;
              if (d > -M && d < M)
                for (int64_t c = 0; c < dh; ++c) want += qv(b, h, i, c) * E(share ? 0 : h, M - 1 + d, c);
              const double v = got[size_t(((b * H + h) * Lq + i) * Lk + j)];
              if (std::abs(v - want) > 1e-12)
                bad += fmt::format("b{} h{} i{} j{} d{}: {} != {}\n", b, h, i, j, d, v, want);
            }
      INFO("share " << share << " Lq " << Lq << " Lk " << Lk << " q_offset " << qo << " k_offset " << ko << "\n"
                    << bad);
      REQUIRE(bad.empty());
    }
}
