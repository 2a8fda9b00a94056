// Stability knobs (nn/stability.h): softcap and z-loss golden values and gradchecks, an
// attention layer with qk_norm / attn_softcap gradchecked through every parameter, and the
// properties that make them stabilisers (qk_norm is invariant to the scale of q and k;
// softcap bounds the logits the monitors see).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "../helpers.h"
#include "attention_fixture.h"
#include "nn/stability.h"
#include "nn/transformer.h"

using namespace relpos;

TEST_CASE("softcap: golden values c * tanh(s / c)", "[nn][stability]") {
  Variable s(Tensor::from_vector(std::vector<double>{0.0, 1.0, 30.0, -90.0}, {4}));
  auto y = nn::softcap(s, 30.0).data().to_vector<double>();
  // python: [30 * math.tanh(v / 30) for v in [0, 1, 30, -90]]
  CHECK(y[0] == Approx(0.0).margin(1e-15));
  CHECK(y[1] == Approx(0.9996297941646859).epsilon(1e-12));
  CHECK(y[2] == Approx(22.847824678672946).epsilon(1e-12));
  CHECK(y[3] == Approx(-29.851642610601914).epsilon(1e-12));
  CHECK_THROWS(nn::softcap(s, 0.0));
}

TEST_CASE("z_loss: golden value mean(logsumexp^2)", "[nn][stability]") {
  // rows [0, 0] -> lse ln 2; [ln 3, 0] -> lse ln 4; mean of squares = (ln2^2 + ln4^2) / 2
  Variable l(Tensor::from_vector(std::vector<double>{0.0, 0.0, std::log(3.0), 0.0}, {1, 2, 2}));
  CHECK(nn::z_loss(l).item() == Approx(1.2011325347955035).epsilon(1e-12));
}

TEST_CASE("softcap and z_loss: float64 gradchecks", "[nn][stability][gradcheck]") {
  test::require_gradcheck("softcap", [](const std::vector<Variable>& in) { return nn::softcap(in[0], 2.5); },
                          {test::rand_var({3, 4}, 3, -6.0, 6.0)});
  test::require_gradcheck("z_loss", [](const std::vector<Variable>& in) { return nn::z_loss(in[0]); },
                          {test::rand_var({2, 3, 5}, 4, -3.0, 3.0)});
}

namespace {

std::shared_ptr<nn::MultiHeadAttention> stable_attention(const std::string& type, const std::string& qk,
                                                         double cap, uint64_t seed = 5) {
  Generator gen(seed);
  nn::PositionConfig pc;
  pc.type = type;
  pc.d_model = 8;
  pc.n_heads = 2;
  pc.head_dim = 4;
  pc.max_len = 64;
  pc.init_std = 0.5;
  pc.dtype = DType::F64;
  nn::AttentionConfig ac;
  ac.d_model = 8;
  ac.n_heads = 2;
  ac.stability.qk_norm = *parse_enum<nn::QkNorm>(qk);
  ac.stability.softcap = cap;
  return std::make_shared<nn::MultiHeadAttention>(ac, nn::make_position_encoding(pc, gen), true, gen, DType::F64);
}

}  // namespace

TEST_CASE("attention with qk_norm and attn_softcap: gradcheck of inputs and every parameter",
          "[nn][stability][gradcheck]") {
  for (std::string type : {"t5", "rope", "alibi"})
    for (std::string qk : {"none", "layernorm", "rmsnorm"})
      for (double cap : {0.0, 1.5}) {
        if (qk == "none" && cap == 0.0) continue;
        auto attn = stable_attention(type, qk, cap);
        Variable x = test::rand_var({2, 5, 8}, 17);
        std::vector<Variable> inputs{x};
        for (auto& p : attn->parameters()) inputs.push_back(p);
        auto fn = [&](const std::vector<Variable>& in) {
          return attn->forward({.xq = in[0], .xkv = in[0], .causal = true});
        };
        INFO(type << " qk_norm=" << qk << " softcap=" << cap);
        test::require_gradcheck("attention stability", fn, inputs);
      }
}

TEST_CASE("qk_norm: parameters q_norm/k_norm exist and the output ignores the scale of q and k", "[nn][stability]") {
  for (std::string qk : {"none", "layernorm"}) {
    auto attn = stable_attention("t5", qk, 0.0);
    bool has = false;
    for (auto& [n, p] : attn->named_parameters()) has = has || n.rfind("q_norm.", 0) == 0;
    CHECK(has == (qk != "none"));
    Variable x = test::rand_var({1, 6, 8}, 23, -1, 1, false);
    Tensor before = attn->forward({.xq = x, .xkv = x, .causal = true}).data().clone();
    for (auto& [n, p] : attn->named_parameters())
      if (n.rfind("q_proj.", 0) == 0 || n.rfind("k_proj.", 0) == 0) k::mul_(p.data(), 10.0);
    Tensor after = attn->forward({.xq = x, .xkv = x, .causal = true}).data();
    INFO("qk_norm " << qk);
    // LayerNorm's eps (1e-5) makes the invariance approximate: (10x)^2 var vs var + eps
    double diff = 0;
    auto a = after.to_vector<double>(), b = before.to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(a[i] - b[i]));
    if (qk == "none") CHECK(diff > 1e-2);
    else CHECK(diff < 1e-3);
  }
}

TEST_CASE("attn_softcap: every logit the monitors see is within the cap", "[nn][stability]") {
  auto attn = stable_attention("alibi", "none", 0.75);
  Variable x = test::rand_var({2, 7, 8}, 29, -3, 3, false);
  nn::AttentionStats st;
  attn->forward({.xq = x, .xkv = x, .causal = true}, {.stats = &st});
  CHECK(st.max_abs_logit <= 0.75);
  CHECK(st.max_abs_logit > 0.1);
  auto raw = stable_attention("alibi", "none", 0.0);
  nn::AttentionStats st2;
  raw->forward({.xq = x, .xkv = x, .causal = true}, {.stats = &st2});
  CHECK(st2.max_abs_logit > 0.75);
}

TEST_CASE("block output monitors: the largest finite |value| and the count of NaN/inf values", "[nn][stability]") {
  Generator gen(4);
  nn::BlockConfig bc;
  bc.d_model = 8;
  bc.n_heads = 2;
  bc.d_ff = 16;
  nn::PositionConfig pc;
  pc.d_model = 8;
  pc.n_heads = 2;
  pc.head_dim = 4;
  nn::TransformerBlock block(bc, nn::make_position_encoding(pc, gen), true, gen);
  Tensor x = Tensor::randn({2, 5, 8}, gen);
  nn::AttentionStats st;
  const Variable y = block.forward(Variable(x), true, Tensor(), 0, Variable(), Tensor(), nullptr, nullptr, &st);
  double mx = 0;
  for (double v : y.data().to_vector<double>()) mx = std::max(mx, std::fabs(v));
  CHECK(st.max_abs_activation == mx);
  CHECK(st.nonfinite_activations == 0);
  // a NaN and an inf in the second sequence's last position (P v multiplies the masked
  // zeros with the NaN values: the whole second sequence turns non-finite, the first stays)
  std::vector<float> xv = x.to_vector<float>();
  xv[size_t(5 * 8 + 4 * 8)] = std::numeric_limits<float>::quiet_NaN();
  xv[size_t(5 * 8 + 4 * 8 + 1)] = std::numeric_limits<float>::infinity();
  nn::AttentionStats bad;
  const Variable yb = block.forward(Variable(Tensor::from_vector<float>(xv, {2, 5, 8})), true, Tensor(), 0, Variable(),
                                    Tensor(), nullptr, nullptr, &bad);
  int64_t nonfinite = 0;
  double finite_max = 0;
  for (double v : yb.data().to_vector<double>())
    std::isfinite(v) ? void(finite_max = std::max(finite_max, std::fabs(v))) : void(++nonfinite);
  CHECK(nonfinite >= 8);
  CHECK(nonfinite <= 40);
  CHECK(bad.nonfinite_activations == nonfinite);
  CHECK(bad.max_abs_activation == finite_max);
}
