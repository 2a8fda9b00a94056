// Attention with the position encodings: float64 gradchecks through a full attention layer
// (inputs and every parameter) for parameter settings that take different branches, KV-cache
// equivalence for those and for every registered decoder encoding, mask order.
#include <catch2/catch.hpp>

#include "../helpers.h"
#include "attention_fixture.h"

using namespace relpos;
using test::make_attention;

namespace {

struct Variant {
  std::string type;
  std::map<std::string, std::string> params;
};

const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = {
      {"none", {}},
      {"sinusoidal", {}},
      {"learned", {}},
      {"t5", {{"num_buckets", "8"}, {"max_distance", "16"}}},
      {"alibi", {{"learnable", "true"}}},
      {"rope", {}},
      {"rope", {{"style", "interleaved"}, {"fraction", "0.5"}}},
      {"rope", {{"scaling", "yarn"}, {"factor", "4"}, {"original_max_len", "8"}}},
      {"shaw", {{"k_max", "2"}}},
      {"kerple_log", {}},
      {"kerple_power", {}},
      {"fire", {{"width", "8"}, {"init_L", "3.5"}}},
      {"sandwich", {}},
      {"dynamic_bias", {{"log_distance", "true"}}},
  };
  return v;
}

std::string label(const Variant& v) {
  std::string s = v.type;
  for (auto& [k, val] : v.params) s += " " + k + "=" + val;
  return s;
}

}  // namespace

TEST_CASE("attention gradcheck: every variant, self-attention, causal and bidirectional", "[nn][gradcheck]") {
  for (const Variant& v : variants())
    for (bool causal : {true, false}) {
      auto s = make_attention(v.type, v.params, 2, 8, /*bias_scale=*/true);
      Variable x = test::rand_var({2, 5, 8}, 11);
      std::vector<Variable> inputs{x};
      for (auto& p : s.attn->parameters()) inputs.push_back(p);
      auto pos = s.attn->position();
      auto fn = [&](const std::vector<Variable>& in) {
        Variable h = pos->embed(in[0], 0);  // absolute variants act on the input
        return s.attn->forward({.xq = h, .xkv = h, .causal = causal});
      };
      INFO(label(v) << (causal ? " causal" : " bidirectional"));
      test::require_gradcheck("attention " + label(v), fn, inputs);
    }
}

TEST_CASE("attention gradcheck: cross-attention Lq != Lk with offsets and key padding", "[nn][gradcheck]") {
  for (const Variant& v : variants()) {
    auto s = make_attention(v.type, v.params, 2, 8, true);
    Variable xq = test::rand_var({2, 3, 8}, 21);
    Variable xkv = test::rand_var({2, 6, 8}, 22);
    Tensor pad = Tensor::zeros({2, 6}, DType::F64);
    pad.narrow(1, 4, 2).select(0, 1).fill_(1.0);  // batch 1: last two keys are padding
    std::vector<Variable> inputs{xq, xkv};
    for (auto& p : s.attn->parameters()) inputs.push_back(p);
    auto fn = [&](const std::vector<Variable>& in) {
      return s.attn->forward({.xq = in[0], .xkv = in[1], .key_padding = pad, .q_offset = 7, .k_offset = 2});
    };
    INFO(label(v));
    test::require_gradcheck("cross-attention " + label(v), fn, inputs);
  }
}

TEST_CASE("attention: token-by-token decoding with a KV cache equals the full causal pass", "[nn][kvcache]") {
  for (const Variant& v : variants()) {
    auto s = make_attention(v.type, v.params, 2, 8, true);
    s.attn->eval();
    auto pos = s.attn->position();
    Variable x = test::rand_var({2, 6, 8}, 31, -1, 1, false);
    Tensor full = s.attn->forward({.xq = pos->embed(x, 0), .xkv = pos->embed(x, 0), .causal = true}).data();
    nn::KVCache cache;
    std::vector<Tensor> steps;
    for (int64_t t = 0; t < 6; ++t) {
      Variable xt = pos->embed(narrow(x, 1, t, 1), t);
      steps.push_back(
          s.attn->forward({.xq = xt, .xkv = xt, .causal = true, .q_offset = t, .k_offset = t}, {.cache = &cache})
              .data());
    }
    INFO(label(v));
    REQUIRE(test::allclose(k::cat(steps, 1), full, 1e-10, 1e-12));
  }
}

namespace {
// A test-only encoding whose Toeplitz bias is a free parameter [H, Lq + Lk - 1], so every
// distance has its own entry.
class FreeToeplitz : public nn::PositionEncoding {
 public:
  FreeToeplitz(int64_t H, int64_t n) {
    Generator g(9);
    table = register_parameter("t", Tensor::randn({H, n}, g, DType::F64), nn::group::kPosition);
  }
  std::string type() const override { return "free_toeplitz"; }
  Variable toeplitz_bias(const nn::AttnGeometry&) const override { return table; }
  Variable table;
};
}  // namespace

TEST_CASE("attention: KV-cache decoding equals the full causal pass for every registered decoder encoding",
          "[nn][kvcache]") {
  int checked = 0;
  for (const auto& e : nn::position_variants()) {
    // Decoding generates tokens without data channels: an encoding that reads them (ast) refuses
    // KV-cache decoding (tests/nn/test_ast_encoding.cpp) and `relpos sample`.
    if (!e.causal_capable || !e.facts.position_channels.empty()) continue;
    auto s = make_attention(e.name, e.facts.gradcheck_params, 2, 8, true);
    s.attn->eval();
    auto pos = s.attn->position();
    Variable x = test::rand_var({2, 6, 8}, 41, -1, 1, false);
    Tensor full = s.attn->forward({.xq = pos->embed(x, 0), .xkv = pos->embed(x, 0), .causal = true}).data();
    nn::KVCache cache;
    std::vector<Tensor> steps;
    for (auto [t, n] : {std::pair<int64_t, int64_t>{0, 2}, {2, 1}, {3, 3}}) {  // chunks of 2, 1 and 3 tokens
      Variable xt = pos->embed(narrow(x, 1, t, n), t);
      steps.push_back(
          s.attn->forward({.xq = xt, .xkv = xt, .causal = true, .q_offset = t, .k_offset = t}, {.cache = &cache})
              .data());
    }
    INFO(e.name);
    REQUIRE(test::allclose(k::cat(steps, 1), full, 1e-10, 1e-12));
    ++checked;
  }
  CHECK(checked >= 17);
}

TEST_CASE("attention: masked keys get zero probability and zero bias gradient", "[nn][mask]") {
  const int64_t H = 2, L = 5;
  auto pos = std::make_shared<FreeToeplitz>(H, 2 * L - 1);
  Generator gen(4);
  nn::AttentionConfig ac;
  ac.d_model = 8;
  ac.n_heads = H;
  nn::MultiHeadAttention attn(ac, pos, true, gen, DType::F64);
  Variable x = test::rand_var({2, L, 8}, 51);
  Variable y = attn.forward({.xq = x, .xkv = x, .causal = true});
  Generator g(3);
  y.backward(Tensor::randn(y.shape(), g, DType::F64));
  // Toeplitz entry t is distance t - (L - 1); t > L - 1 are future keys.
  auto grad = pos->table.grad().to_vector<double>();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < 2 * L - 1; ++t) {
      INFO("head " << h << " entry " << t);
      if (t > L - 1)
        REQUIRE(grad[size_t(h * (2 * L - 1) + t)] == 0.0);
      else
        REQUIRE(grad[size_t(h * (2 * L - 1) + t)] != 0.0);
    }
  // Future keys have probability exactly 0: a huge bias on them changes nothing, bit for bit.
  Tensor before = y.data().clone();
  pos->table.data().narrow(1, L, L - 1).fill_(1e6);
  Tensor after = attn.forward({.xq = x, .xkv = x, .causal = true}).data();
  REQUIRE(after.to_vector<double>() == before.to_vector<double>());
}
