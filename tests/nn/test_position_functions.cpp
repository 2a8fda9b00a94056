// The encodings whose bias or rotation is a closed-form or learned function of the positions
// (kerple_log, kerple_power, fire, sandwich, dynamic_bias, xpos), the contextual one (cope)
// and RoPE evaluation-time scaling: float64 gradchecks through a full attention layer
// with every parameter, golden values from the reference formulas (evaluated here in plain
// C++ from the parameter values, never by the code under test), KV-cache equivalence, and the
// causal-only checks.
#include <catch2/catch.hpp>
#include <cmath>

#include "../helpers.h"
#include "attention_fixture.h"
#include "nn/models.h"

using namespace relpos;
using Catch::Contains;
using test::make_attention;

namespace {

struct Variant {
  std::string type;
  std::map<std::string, std::string> params;
};

std::string label(const Variant& v) {
  std::string s = v.type;
  for (auto& [k, val] : v.params) s += " " + k + "=" + val;
  return s;
}

const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = {
      {"kerple_log", {}},
      {"kerple_log", {{"r1_init", "1.5"}, {"r2_init", "0.3"}}},
      {"kerple_power", {}},
      {"kerple_power", {{"r1_init", "0.7"}, {"r2_init", "1.9"}}},
      {"fire", {{"width", "8"}}},
      {"fire", {{"width", "6"}, {"init_L", "2.5"}, {"init_c", "0.7"}}},  // both branches of max(L, qi)
      {"sandwich", {}},
      {"sandwich", {{"dim", "6"}}},
      {"dynamic_bias", {}},
      {"dynamic_bias", {{"depth", "3"}, {"width", "5"}, {"log_distance", "true"}}},
      {"xpos", {}},
      {"xpos", {{"style", "half"}, {"scale_base", "8"}}},
      {"cope", {}},
      {"cope", {{"npos_max", "3"}}},  // positions beyond 2 are clamped
  };
  return v;
}

bool causal_only(const Variant& v) {
  return v.type == "xpos" || v.type == "cope";
}

std::shared_ptr<nn::PositionEncoding> make_pos(const std::string& type, std::map<std::string, std::string> params,
                                               int64_t H, int64_t head_dim, uint64_t seed = 3) {
  Generator gen(seed);
  nn::PositionConfig pc;
  pc.type = type;
  pc.n_heads = H;
  pc.head_dim = head_dim;
  pc.d_model = H * head_dim;
  pc.max_len = 64;
  pc.init_std = 0.5;
  pc.params = nn::PositionParams(params);
  pc.dtype = DType::F64;
  return nn::make_position_encoding(pc, gen);
}

Variable param(const nn::Module& m, const std::string& name) {
  for (auto& [n, p] : m.named_parameters())
    if (n == name) return p;
  FAIL("no parameter " << name);
  return {};
}

// The Toeplitz bias of query row i and key column j of geometry g, head h.
double toeplitz_at(const nn::PositionEncoding& pos, const nn::AttnGeometry& g, int64_t i, int64_t j, int64_t h) {
  Tensor t = pos.toeplitz_bias(g).data();
  return t.to_vector<double>()[size_t(h * (g.Lq + g.Lk - 1) + j - i + g.Lq - 1)];
}

nn::PositionParams pp(std::map<std::string, std::string> kv) {
  return nn::PositionParams(std::move(kv));
}

double softplus(double u) {
  return std::log1p(std::exp(u));
}
double sigmoid(double u) {
  return 1.0 / (1.0 + std::exp(-u));
}

}  // namespace

// ---------------------------------------------------------------- gradchecks

TEST_CASE("position functions: gradcheck through attention, self-attention causal and bidirectional",
          "[nn][gradcheck][posfn]") {
  for (const Variant& v : variants())
    for (bool causal : {true, false}) {
      if (!causal && causal_only(v)) continue;
      auto s = make_attention(v.type, v.params, 2, 8, /*bias_scale=*/true);
      Variable x = test::rand_var({2, 5, 8}, 11);
      std::vector<Variable> inputs{x};
      for (auto& p : s.attn->parameters()) inputs.push_back(p);
      REQUIRE(inputs.size() >= 9);  // q/k/v/o weights and biases, alpha, and the encoding's own
      auto fn = [&](const std::vector<Variable>& in) {
        return s.attn->forward({.xq = in[0], .xkv = in[0], .causal = causal});
      };
      INFO(label(v) << (causal ? " causal" : " bidirectional"));
      test::require_gradcheck("attention " + label(v), fn, inputs);
    }
}

TEST_CASE("position functions: gradcheck with Lq != Lk and offsets (cross-attention, or a causal chunk)",
          "[nn][gradcheck][posfn]") {
  for (const Variant& v : variants()) {
    auto s = make_attention(v.type, v.params, 2, 8, true);
    Variable xq = test::rand_var({2, 3, 8}, 21);
    Variable xkv = test::rand_var({2, 6, 8}, 22);
    std::vector<Variable> inputs{xq, xkv};
    for (auto& p : s.attn->parameters()) inputs.push_back(p);
    Tensor pad = Tensor::zeros({2, 6}, DType::F64);
    pad.narrow(1, 4, 2).select(0, 1).fill_(1.0);
    // causal-only: 3 queries at positions 5..7 over keys 2..7 (the last chunk of a sequence);
    // otherwise cross-attention with queries at 7..9, keys at 2..7 and key padding.
    auto fn = [&](const std::vector<Variable>& in) {
      if (causal_only(v))
        return s.attn->forward({.xq = in[0], .xkv = in[1], .causal = true, .q_offset = 5, .k_offset = 2});
      return s.attn->forward({.xq = in[0], .xkv = in[1], .key_padding = pad, .q_offset = 7, .k_offset = 2});
    };
    INFO(label(v));
    test::require_gradcheck("offsets " + label(v), fn, inputs);
  }
}

// ---------------------------------------------------------------- KV cache

TEST_CASE("position functions: decoding with a KV cache (1 and 3 tokens a step) equals the full causal pass",
          "[nn][kvcache][posfn]") {
  for (const Variant& v : variants())
    for (int64_t chunk : {1, 3}) {
      auto s = make_attention(v.type, v.params, 2, 8, true);
      s.attn->eval();
      Variable x = test::rand_var({2, 6, 8}, 31, -1, 1, false);
      Tensor full = s.attn->forward({.xq = x, .xkv = x, .causal = true}).data();
      nn::KVCache cache;
      std::vector<Tensor> steps;
      for (int64_t t = 0; t < 6; t += chunk) {
        Variable xt = narrow(x, 1, t, chunk);
        steps.push_back(
            s.attn->forward({.xq = xt, .xkv = xt, .causal = true, .q_offset = t, .k_offset = t}, {.cache = &cache})
                .data());
      }
      INFO(label(v) << " chunk " << chunk);
      REQUIRE(test::allclose(k::cat(steps, 1), full, 1e-10, 1e-12));
    }
}

TEST_CASE("position functions: model decode_step equals the full forward, per-layer defaults",
          "[nn][models][kvcache][posfn]") {
  for (std::string pos : {"kerple_log", "kerple_power", "fire", "sandwich", "dynamic_bias", "xpos", "cope"}) {
    nn::ModelConfig c;
    c.kind = nn::ModelKind::Decoder;
    c.vocab = 11;
    c.d_model = 8;
    c.n_layers = 2;
    c.n_heads = 2;
    c.d_ff = 16;
    c.max_len = 32;
    c.position = pos;
    c.position_std = 0.3;
    c.init_std = 0.5;
    c.dtype = DType::F64;
    nn::Model m(c);
    m.eval();
    std::vector<int64_t> ids = {1, 5, 2, 9, 3, 3, 7, 0, 4, 6, 10, 2, 8, 1};
    Tensor x = Tensor::from_vector(ids, {2, 7});
    Tensor full = m.forward(x).data();
    nn::DecodeState st;
    std::vector<Tensor> steps;
    steps.push_back(m.decode_step(x.narrow(1, 0, 3).contiguous(), st).data());
    for (int64_t t = 3; t < 7; ++t) steps.push_back(m.decode_step(x.narrow(1, t, 1).contiguous(), st).data());
    INFO(pos);
    REQUIRE(test::allclose(k::cat(steps, 1), full, 1e-10, 1e-12));
    bool per_layer = false;
    for (auto& [n, p] : m.named_parameters())
      if (n.find("layers.1.attn.pos.") != std::string::npos) per_layer = true;
    REQUIRE(per_layer == (pos == "fire" || pos == "cope"));
  }
}

// ---------------------------------------------------------------- causal-only

TEST_CASE("xpos and cope are rejected in bidirectional attention and in encoders", "[nn][posfn]") {
  for (std::string type : {"xpos", "cope"}) {
    INFO(type);
    auto s = make_attention(type);
    REQUIRE(s.attn->position()->causal_only());
    Variable x = test::rand_var({1, 4, 8}, 1, -1, 1, false);
    REQUIRE_THROWS_WITH(s.attn->forward({.xq = x, .xkv = x}),
                        Contains("'" + type + "'") && Contains("only works with causal attention"));
    nn::ModelConfig c;
    c.kind = nn::ModelKind::Encoder;
    c.vocab = 11;
    c.d_model = 8;
    c.n_heads = 2;
    c.d_ff = 16;
    c.max_len = 16;
    c.position = type;
    REQUIRE_THROWS_WITH(nn::Model(c), Contains("'" + type + "'") && Contains("causal-only"));
  }
  for (std::string type : {"kerple_log", "kerple_power", "fire", "sandwich", "dynamic_bias"})
    REQUIRE_FALSE(make_attention(type).attn->position()->causal_only());
}

// ---------------------------------------------------------------- golden: KERPLE

TEST_CASE("kerple_log golden: r1 = r2 = 1 gives -log(1 + |d|) (reference table)", "[positional][golden][posfn]") {
  auto pos = make_pos("kerple_log", {{"r1_init", "1"}, {"r2_init", "1"}}, 2, 4);
  // query at 4, keys 0..8: distances -4..4
  nn::AttnGeometry g{1, 9, 4, 0, true};
  const std::vector<double> want = {-0.0, -0.6931471805599453, -1.0986122886681098, -1.3862943611198906,
                                    -1.6094379124341003};  // d = 0..4
  for (bool causal : {true, false}) {
    g.causal = causal;
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t d = 0; d <= 4; ++d) {
        INFO("head " << h << " |d| " << d);
        REQUIRE(toeplitz_at(*pos, g, 0, 4 - d, h) == Approx(want[size_t(d)]).margin(1e-13));
        REQUIRE(toeplitz_at(*pos, g, 0, 4 + d, h) == Approx(want[size_t(d)]).margin(1e-13));  // symmetric
      }
  }
}

TEST_CASE("kerple_log golden: reference init ranges and the softplus map at chosen distances",
          "[positional][golden][posfn]") {
  auto pos = make_pos("kerple_log", {}, 4, 4, 77);
  auto u1 = param(*pos, "r1_raw").data().to_vector<double>(), u2 = param(*pos, "r2_raw").data().to_vector<double>();
  REQUIRE(u1.size() == 4);
  nn::AttnGeometry g{2, 7, 5, 0, true};  // queries 5, 6; keys 0..6
  for (int64_t h = 0; h < 4; ++h) {
    const double r1 = softplus(u1[size_t(h)]), r2 = softplus(u2[size_t(h)]);
    REQUIRE(r1 >= 0.01 - 1e-12);
    REQUIRE(r1 <= 2.0);
    REQUIRE(r2 >= 0.01 - 1e-12);
    REQUIRE(r2 <= 1.0);
    for (auto [i, j] : std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {1, 0}, {1, 3}, {0, 5}, {1, 6}}) {
      const double d = std::abs(double(j - (5 + i)));
      INFO("head " << h << " i " << i << " j " << j);
      REQUIRE(toeplitz_at(*pos, g, i, j, h) == Approx(-r1 * std::log(1 + r2 * d)).epsilon(1e-13));
    }
  }
  REQUIRE_THROWS_WITH(make_pos("kerple_log", {{"r1_init", "-1"}}, 2, 4), Contains("r1_init must be > 0"));
}

TEST_CASE("kerple_power golden: r1 = r2 = 1 is ALiBi with slope 1, r2 in (0, 2) via 2 sigmoid",
          "[positional][golden][posfn]") {
  auto pos = make_pos("kerple_power", {{"r1_init", "1"}, {"r2_init", "1"}}, 2, 4);
  nn::AttnGeometry g{1, 9, 4, 0, false};
  for (int64_t d = 0; d <= 4; ++d) {
    REQUIRE(toeplitz_at(*pos, g, 0, 4 - d, 1) == Approx(-double(d)).margin(1e-13));  // reference: 0, -1, .., -4
    REQUIRE(toeplitz_at(*pos, g, 0, 4 + d, 0) == Approx(-double(d)).margin(1e-13));
  }
  auto half = make_pos("kerple_power", {{"r1_init", "0.5"}, {"r2_init", "1.5"}}, 1, 4);
  REQUIRE(toeplitz_at(*half, g, 0, 0, 0) == Approx(-0.5 * 8.0).epsilon(1e-13));  // |d| = 4: 4^1.5 = 8
  REQUIRE(toeplitz_at(*half, g, 0, 4, 0) == 0.0);
  auto rnd = make_pos("kerple_power", {}, 4, 4, 78);
  auto u1 = param(*rnd, "r1_raw").data().to_vector<double>(), u2 = param(*rnd, "r2_raw").data().to_vector<double>();
  for (int64_t h = 0; h < 4; ++h) {
    const double r1 = softplus(u1[size_t(h)]), r2 = 2 * sigmoid(u2[size_t(h)]);
    REQUIRE((r1 > 0 && r1 <= 1.0));
    REQUIRE((r2 > 0 && r2 < 2.0));
    for (int64_t d : {1, 3, 4})
      REQUIRE(toeplitz_at(*rnd, g, 0, 4 + d, h) == Approx(-r1 * std::pow(d, r2)).epsilon(1e-12));
  }
  REQUIRE_THROWS_WITH(make_pos("kerple_power", {{"r2_init", "2"}}, 2, 4), Contains("r2_init must be in (0, 2)"));
}

// ---------------------------------------------------------------- golden: Sandwich

TEST_CASE("sandwich golden: (sum_p cos(d / 10000^(2p/d')) - d'/2) / ((h+1) 8 / H)", "[positional][golden][posfn]") {
  // d' = 4: frequencies 10000^(-1/2) = 1/100 and 10000^(-1) = 1/10000; H = 2: divisors 4, 8
  auto pos = make_pos("sandwich", {}, 2, 4);
  nn::AttnGeometry g{1, 301, 150, 0, true};
  for (int64_t d : {0, 1, 7, 150}) {
    const double s = std::cos(d / 100.0) + std::cos(d / 10000.0) - 2.0;
    INFO("d " << d);
    REQUIRE(toeplitz_at(*pos, g, 0, 150 - d, 0) == Approx(s / 4.0).margin(1e-15));
    REQUIRE(toeplitz_at(*pos, g, 0, 150 + d, 0) == Approx(s / 4.0).margin(1e-15));
    REQUIRE(toeplitz_at(*pos, g, 0, 150 - d, 1) == Approx(s / 8.0).margin(1e-15));
  }
  // a hand value: d = 100, d' = 4, head 0: (cos 1 + cos 0.01 - 2) / 4
  REQUIRE(toeplitz_at(*pos, g, 0, 50, 0) == Approx((0.5403023058681398 + 0.9999500004166653 - 2) / 4).epsilon(1e-14));
  // d' = 2 (dim parameter): only 1/10000; 8 heads: divisor (h + 1)
  auto two = make_pos("sandwich", {{"dim", "2"}}, 8, 4);
  REQUIRE(toeplitz_at(*two, g, 0, 50, 7) == Approx((std::cos(0.01) - 1) / 8.0).epsilon(1e-12));
  REQUIRE(two->parameters().empty());
}

// ---------------------------------------------------------------- golden: FIRE

TEST_CASE("fire golden: normalised distances of the reference (identity MLP), not Toeplitz",
          "[positional][golden][posfn]") {
  // MLP 1 -> 4 -> H with hidden unit 0 = relu(x) and head h = (h + 1) * unit 0: bias = (h+1) x
  auto pos = make_pos("fire", {{"width", "4"}}, 2, 4);
  param(*pos, "mlp.0.weight").data().fill_(0.0);
  param(*pos, "mlp.0.weight").data().narrow(0, 0, 1).fill_(1.0);
  param(*pos, "mlp.0.bias").data().fill_(0.0);
  param(*pos, "mlp.1.weight").data().fill_(0.0);
  param(*pos, "mlp.1.weight").data().select(0, 0).narrow(0, 0, 1).fill_(1.0);
  param(*pos, "mlp.1.weight").data().select(0, 1).narrow(0, 0, 1).fill_(2.0);
  param(*pos, "mlp.1.bias").data().fill_(0.0);
  auto bias = [&](int64_t qi, int64_t kj, int64_t h, bool causal = true) {
    nn::AttnGeometry g{1, 1, qi, kj, causal};
    // FIRE is an additive score bias [H, Lq, Lk] in logit units (added after scaling, times alpha)
    Tensor t = pos->score_bias(g).data();
    REQUIRE(t.shape() == Shape{2, 1, 1});
    return t.to_vector<double>()[size_t(h)];
  };
  // reference examples (c = 0.1, L = 512): i = 600 -> 1.0, 0.8353, 0; i = 3, j = 0 -> 0.0663
  REQUIRE(bias(600, 0, 0) == Approx(std::log(61.0) / (std::log(61.0) + 1e-6)).epsilon(1e-12));
  REQUIRE(bias(600, 300, 0) == Approx(0.8353).margin(5e-5));
  REQUIRE(bias(600, 300, 0) == Approx(std::log(31.0) / (std::log(61.0) + 1e-6)).epsilon(1e-12));
  REQUIRE(bias(600, 600, 0) == 0.0);
  REQUIRE(bias(3, 0, 0) == Approx(0.0663).margin(5e-5));
  REQUIRE(bias(3, 0, 1) == Approx(2 * std::log(1.3) / (std::log(52.2) + 1e-6)).epsilon(1e-12));
  // not Toeplitz: distance 1 at query 600 vs query 3 (threshold 512 applies to the latter)
  REQUIRE(bias(600, 599, 0) == Approx(std::log(1.1) / (std::log(61.0) + 1e-6)).epsilon(1e-12));
  REQUIRE(bias(3, 2, 0) == Approx(std::log(1.1) / (std::log(52.2) + 1e-6)).epsilon(1e-12));
  // bidirectional: |i - j| (same as the reference module, which applies abs and no mask)
  REQUIRE(bias(3, 6, 0, false) == Approx(bias(3, 0, 0)).epsilon(1e-14));
  // the learned threshold: L = |L_multiplier * 512|
  param(*pos, "L_multiplier").data().fill_(-0.5);  // L = 256
  REQUIRE(bias(3, 0, 0) == Approx(std::log(1.3) / (std::log(26.6) + 1e-6)).epsilon(1e-12));
}

TEST_CASE("fire: the attention logit receives exactly the MLP output (a score bias added after the scaling)",
          "[positional][posfn]") {
  auto s = make_attention("fire", {{"width", "8"}, {"init_L", "3.5"}}, 2, 8);
  auto pos = s.attn->position();
  // compute the random MLP by hand at qi = 4, kj = 1 (causal): x = psi(3) / psi(max(3.5, 4))
  const double c = 0.1, x = std::log(1 + c * 3) / (std::log(1 + c * 4) + 1e-6);
  auto w1 = param(*pos, "mlp.0.weight").data().to_vector<double>(),
       b1 = param(*pos, "mlp.0.bias").data().to_vector<double>();
  auto w2 = param(*pos, "mlp.1.weight").data().to_vector<double>(),
       b2 = param(*pos, "mlp.1.bias").data().to_vector<double>();
  nn::AttnGeometry g{1, 1, 4, 1, true};
  REQUIRE(!pos->score_terms(Variable(Tensor::zeros({1, 2, 1, 4}, DType::F64)),
                            Variable(Tensor::zeros({1, 2, 1, 4}, DType::F64)), g)
               .defined());
  auto t = pos->score_bias(g).data().to_vector<double>();
  for (int64_t h = 0; h < 2; ++h) {
    double y = b2[size_t(h)];
    for (size_t u = 0; u < 8; ++u) y += w2[size_t(h) * 8 + u] * std::max(0.0, w1[u] * x + b1[u]);
    REQUIRE(t[size_t(h)] == Approx(y).epsilon(1e-12));
  }
}

// ---------------------------------------------------------------- golden: dynamic bias

TEST_CASE("dynamic_bias golden: SiLU MLP of qi - kj (x-transformers sign), optional sign*log",
          "[positional][golden][posfn]") {
  for (bool logd : {false, true}) {
    auto pos =
        make_pos("dynamic_bias", {{"depth", "2"}, {"width", "3"}, {"log_distance", logd ? "true" : "false"}}, 2, 4);
    std::vector<std::vector<double>> W, B;
    for (int l = 0; l < 3; ++l) {
      W.push_back(param(*pos, "mlp." + std::to_string(l) + ".weight").data().to_vector<double>());
      B.push_back(param(*pos, "mlp." + std::to_string(l) + ".bias").data().to_vector<double>());
    }
    auto silu = [](double v) { return v / (1 + std::exp(-v)); };
    auto mlp = [&](double x, int64_t h) {
      std::vector<double> a(3), b(3);
      for (size_t u = 0; u < 3; ++u) a[u] = silu(W[0][u] * x + B[0][u]);
      for (size_t u = 0; u < 3; ++u) {
        double z = B[1][u];
        for (size_t v = 0; v < 3; ++v) z += W[1][u * 3 + v] * a[v];
        b[u] = silu(z);
      }
      double y = B[2][size_t(h)];
      for (size_t v = 0; v < 3; ++v) y += W[2][size_t(h) * 3 + v] * b[v];
      return y;
    };
    nn::AttnGeometry g{2, 6, 3, 0, false};  // queries 3, 4; keys 0..5
    for (int64_t h = 0; h < 2; ++h)
      for (auto [i, j] : std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {0, 5}, {1, 0}, {1, 4}, {0, 3}}) {
        double x = double((3 + i) - j);
        if (logd) x = (x > 0 ? 1 : x < 0 ? -1 : 0) * std::log(std::abs(x) + 1);
        INFO("log " << logd << " head " << h << " i " << i << " j " << j);
        REQUIRE(toeplitz_at(*pos, g, i, j, h) == Approx(mlp(x, h)).epsilon(1e-12));
      }
    // signed: left and right differ
    REQUIRE(std::abs(toeplitz_at(*pos, g, 0, 1, 0) - toeplitz_at(*pos, g, 0, 5, 0)) > 1e-6);
  }
}

// ---------------------------------------------------------------- golden: xPos

TEST_CASE("xpos golden: rotation and zeta^(+-pos/scale_base) per pair, closed form", "[positional][golden][posfn]") {
  // head_dim 4, base 10000, gamma 0.4: theta = 1, 1/100; zeta = 0.4/1.4, 0.9/1.4
  for (std::string style : {"interleaved", "half"}) {
    auto pos = make_pos("xpos", {{"style", style}, {"scale_base", "16"}}, 1, 4);
    const std::vector<double> x = {0.3, -0.7, 1.1, 0.5};
    Variable xv(Tensor::from_vector(x, {1, 1, 1, 4}));
    const int64_t m = 5;
    auto qr = pos->rotate(xv, m).data().to_vector<double>();
    auto kr = pos->rotate_key(xv, m).data().to_vector<double>();
    const double theta[2] = {1.0, 0.01}, zeta[2] = {0.4 / 1.4, 0.9 / 1.4};
    for (int p = 0; p < 2; ++p) {
      const size_t ia = style == "half" ? size_t(p) : size_t(2 * p),
                   ib = style == "half" ? size_t(p + 2) : size_t(2 * p + 1);
      const double a = x[ia], b = x[ib], ang = m * theta[p];
      const double ra = a * std::cos(ang) - b * std::sin(ang), rb = a * std::sin(ang) + b * std::cos(ang);
      const double up = std::pow(zeta[p], m / 16.0), down = std::pow(zeta[p], -m / 16.0);
      INFO(style << " pair " << p);
      REQUIRE(qr[ia] == Approx(ra * up).epsilon(1e-13));
      REQUIRE(qr[ib] == Approx(rb * up).epsilon(1e-13));
      REQUIRE(kr[ia] == Approx(ra * down).epsilon(1e-13));
      REQUIRE(kr[ib] == Approx(rb * down).epsilon(1e-13));
    }
  }
}

TEST_CASE("xpos: q.k is shift invariant and decays with m - n (causal setting)", "[positional][golden][posfn]") {
  for (std::string style : {"interleaved", "half"}) {
    auto pos = make_pos("xpos", {{"style", style}}, 1, 8);
    Variable q = test::rand_var({1, 1, 1, 8}, 1, -1, 1, false);
    Variable kk = test::rand_var({1, 1, 1, 8}, 2, -1, 1, false);
    auto score = [&](int64_t m, int64_t n) { return sum(pos->rotate(q, m) * pos->rotate_key(kk, n)).item(); };
    // closed form: sum_p zeta_p^((m-n)/512) [(ac + bd) cos(phi) + (ad - bc) sin(phi)], phi = (m-n) theta_p
    auto closed = [&](int64_t delta) {
      auto qv = q.data().to_vector<double>(), kv = kk.data().to_vector<double>();
      double s = 0;
      for (int p = 0; p < 4; ++p) {
        const size_t ia = style == "half" ? size_t(p) : size_t(2 * p),
                     ib = style == "half" ? size_t(p + 4) : size_t(2 * p + 1);
        const double a = qv[ia], b = qv[ib], c = kv[ia], d = kv[ib];
        const double phi = double(delta) * std::pow(10000.0, -2.0 * p / 8.0);
        const double zeta = (2.0 * p / 8.0 + 0.4) / 1.4;
        s +=
            std::pow(zeta, double(delta) / 512.0) * ((a * c + b * d) * std::cos(phi) + (a * d - b * c) * std::sin(phi));
      }
      return s;
    };
    INFO(style);
    for (int64_t delta : {0, 1, 3, 40})
      for (int64_t shift : {0, 7, 100, 2000}) {
        INFO("m - n " << delta << " shift " << shift);
        REQUIRE(score(shift + delta, shift) == Approx(score(delta, 0)).epsilon(1e-9));
        REQUIRE(score(shift + delta, shift) == Approx(closed(delta)).epsilon(1e-9));
      }
    // the decay: with q = k on pair 0 only, q.k = zeta_0^(delta/512) |q|^2 cos(delta)
    Tensor e = Tensor::zeros({1, 1, 1, 8}, DType::F64);
    e.narrow(3, 0, 1).fill_(1.0);
    Variable ev(e);
    const double s1 = sum(pos->rotate(ev, 800) * pos->rotate_key(ev, 90)).item();  // m - n = 710
    REQUIRE(s1 == Approx(std::pow(0.4 / 1.4, 710.0 / 512.0) * std::cos(710.0)).epsilon(1e-9));
  }
}

// ---------------------------------------------------------------- golden: CoPE

TEST_CASE("cope golden: gates [0.9, 0.1, 0.8, 0.99] give p = [2.79, 1.89, 1.79, 0.99] (reference example)",
          "[positional][golden][posfn]") {
  for (int64_t npos : {16, 3}) {
    auto pos = make_pos("cope", {{"npos_max", std::to_string(npos)}}, 1, 1);
    Variable table = param(*pos, "table");  // e[r] = r, q = 1: z[r] = r, so the term is p itself
    for (int64_t r = 0; r < npos; ++r) table.data().narrow(0, r, 1).fill_(double(r));
    const std::vector<double> gates = {0.9, 0.1, 0.8, 0.99};
    std::vector<double> kv;
    for (double gg : gates) kv.push_back(std::log(gg / (1 - gg)));  // head_dim 1: scale 1, q.k = k
    Variable q(Tensor::ones({1, 1, 1, 1}, DType::F64));
    Variable k(Tensor::from_vector(kv, {1, 1, 4, 1}));
    nn::AttnGeometry g{1, 4, 3, 0, true};
    auto t = pos->score_terms(q, k, g).data().to_vector<double>();
    std::vector<double> want = {2.79, 1.89, 1.79, 0.99};
    INFO("npos_max " << npos);
    for (size_t j = 0; j < 4; ++j) REQUIRE(t[j] == Approx(std::min(want[j], double(npos - 1))).epsilon(1e-12));
  }
}

TEST_CASE("cope golden: interpolated q.e(p) from gated counts, future keys gated out", "[positional][golden][posfn]") {
  const int64_t H = 2, d = 4, Lq = 3, Lk = 5, q0 = 2;  // queries 2..4, keys 0..4
  auto pos = make_pos("cope", {{"npos_max", "4"}}, H, d, 9);
  Variable q = test::rand_var({1, H, Lq, d}, 41, -2, 2, false);
  Variable k = test::rand_var({1, H, Lk, d}, 42, -2, 2, false);
  auto e = param(*pos, "table").data().to_vector<double>();
  auto qv = q.data().to_vector<double>(), kv = k.data().to_vector<double>();
  auto t = pos->score_terms(q, k, {Lq, Lk, q0, 0, true}).data().to_vector<double>();
  const double s = 0.5;  // 1/sqrt(4)
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < Lq; ++i) {
      auto dot = [&](const double* a, const double* b) {
        double r = 0;
        for (int64_t c = 0; c < d; ++c) r += a[c] * b[c];
        return r;
      };
      const double* qi = &qv[size_t((h * Lq + i) * d)];
      std::vector<double> gate(size_t(Lk), 0.0);
      for (int64_t j = 0; j < Lk; ++j)
        gate[size_t(j)] = j <= q0 + i ? 1 / (1 + std::exp(-s * dot(qi, &kv[size_t((h * Lk + j) * d)]))) : 0.0;
      for (int64_t j = 0; j < Lk; ++j) {
        double p = 0;
        for (int64_t u = j; u < Lk; ++u) p += gate[size_t(u)];
        p = std::min(p, 3.0);
        const double lo = std::floor(p), w = p - lo;
        const double zl = dot(qi, &e[size_t(lo) * size_t(d)]), zh = dot(qi, &e[size_t(std::ceil(p)) * size_t(d)]);
        INFO("head " << h << " i " << i << " j " << j);
        // the logit receives (1 - w) z[floor p] + w z[ceil p]; score terms are pre-divided by s
        REQUIRE(t[size_t((h * Lq + i) * Lk + j)] * s == Approx((1 - w) * zl + w * zh).epsilon(1e-12));
      }
    }
}

// ---------------------------------------------------------------- RoPE eval-time scaling

TEST_CASE("rope set_eval_scaling: changes long-range scores, factor 1 is a no-op", "[positional][posfn]") {
  auto s = make_attention("rope", {{"original_max_len", "16"}}, 1, 8);
  auto pos = s.attn->position();
  Variable q = test::rand_var({1, 1, 1, 8}, 1, -1, 1, false);
  Variable kk = test::rand_var({1, 1, 1, 8}, 2, -1, 1, false);
  auto score = [&](int64_t m, int64_t n) { return sum(pos->rotate(q, m) * pos->rotate_key(kk, n)).item(); };
  const double base_long = score(300, 20), base_short = score(3, 2);
  for (std::string scaling : {"linear", "ntk", "yarn"}) {
    INFO(scaling);
    pos->set_eval_scaling(pp({{"scaling", scaling}, {"factor", "1"}}));
    REQUIRE(score(300, 20) == Approx(base_long).epsilon(1e-12));
    REQUIRE(score(3, 2) == Approx(base_short).epsilon(1e-12));
    pos->set_eval_scaling(pp({{"scaling", scaling}, {"factor", "4"}}));
    REQUIRE(std::abs(score(300, 20) - base_long) > 1e-3);
    REQUIRE(score(300 + 50, 20 + 50) == Approx(score(300, 20)).epsilon(1e-10));  // still relative
  }
  // linear factor 4 at distance 280 equals the unscaled score at distance 70
  pos->set_eval_scaling(pp({{"scaling", "linear"}, {"factor", "4"}}));
  const double scaled = score(300, 20);
  pos->set_eval_scaling(pp({{"scaling", "none"}}));
  REQUIRE(score(300, 20) == Approx(base_long).epsilon(1e-12));
  REQUIRE(scaled == Approx(score(70, 0)).epsilon(1e-10));
  // the attention output follows
  Variable x = test::rand_var({1, 40, 8}, 3, -1, 1, false);
  Tensor before = s.attn->forward({.xq = x, .xkv = x, .causal = true, .q_offset = 200, .k_offset = 200}).data();
  pos->set_eval_scaling(pp({{"scaling", "ntk"}, {"factor", "8"}}));
  REQUIRE_FALSE(
      test::allclose(s.attn->forward({.xq = x, .xkv = x, .causal = true, .q_offset = 200, .k_offset = 200}).data(),
                     before, 1e-6, 1e-9));
  // errors
  REQUIRE_THROWS_WITH(pos->set_eval_scaling(pp({{"factr", "2"}})), Contains("did you mean 'factor'"));
  REQUIRE_THROWS_WITH(pos->set_eval_scaling(pp({{"factor", "0.5"}})), Contains("factor must be >= 1"));
  REQUIRE_THROWS_WITH(make_attention("t5").attn->position()->set_eval_scaling(pp({{"factor", "2"}})),
                      Contains("not supported by position encoding 't5'"));
}
