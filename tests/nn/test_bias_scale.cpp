// The bias scale alpha on FIRE, whose bias is a dense score bias: alpha must scale FIRE's bias exactly
// as it scales every other additive bias: scores + alpha_h * bias. Checked three ways:
// alpha = 0 removes the bias (equals attention with the bias switched off by a zero MLP
// output), the output depends on alpha (alpha's gradient is non-zero), and a float64
// gradcheck over inputs, the FIRE parameters and alpha passes.
#include <catch2/catch.hpp>

#include "../helpers.h"
#include "../nn/attention_fixture.h"
#include "autograd/grad_mode.h"

using namespace relpos;

namespace {
Variable named(const nn::Module& m, const std::string& suffix) {
  for (auto& [n, p] : m.named_parameters())
    if (n.size() >= suffix.size() && n.substr(n.size() - suffix.size()) == suffix) return p;
  FAIL("no parameter " << suffix);
  return {};
}
}  // namespace

TEST_CASE("fire: the bias scale alpha applies to FIRE's bias", "[nn][fire][bias_scale]") {
  auto s = test::make_attention("fire", {}, 2, 8, /*bias_scale=*/true);
  Variable alpha = named(*s.attn, "bias_scale");
  REQUIRE(alpha.numel() == 2);
  Variable x = test::rand_var({1, 5, 8}, 3, -1, 1, false);
  auto out = [&] {
    NoGradGuard ng;
    return s.attn->forward({.xq = x, .xkv = x, .causal = true}).data().clone();
  };
  const Tensor at07 = out();
  alpha.data().fill_(0.0);
  const Tensor at0 = out();
  // With alpha = 0 the result must equal a layer whose FIRE MLP outputs zero (no bias).
  auto fc = [&](const std::string& suffix) { return named(*s.attn, suffix); };
  std::vector<std::pair<Variable, Tensor>> saved;
  for (const char* p : {"mlp.1.weight", "mlp.1.bias"}) {
    Variable v = fc(p);
    saved.emplace_back(v, v.data().clone());
    v.data().fill_(0.0);
  }
  alpha.data().fill_(0.7);
  const Tensor nobias = out();
  for (auto& [v, t] : saved) v.data().copy_(t);
  REQUIRE(test::allclose(at0, nobias, 1e-12, 1e-12));
  REQUIRE(!test::allclose(at07, at0, 1e-6, 1e-9));  // alpha changes the output

  // Gradcheck over input, FIRE parameters and alpha.
  alpha.data().fill_(0.7);
  Variable xg = test::rand_var({2, 5, 8}, 11);
  std::vector<Variable> inputs{xg};
  for (auto& p : s.attn->parameters()) inputs.push_back(p);
  auto fn = [&](const std::vector<Variable>& in) {
    return s.attn->forward({.xq = in[0], .xkv = in[0], .causal = true});
  };
  test::require_gradcheck("fire attention with alpha", fn, inputs);
  // alpha receives a gradient
  Variable y = s.attn->forward({.xq = xg, .xkv = xg, .causal = true});
  sum(y * y).backward();
  REQUIRE(alpha.grad().defined());
  auto g = alpha.grad().to_vector<double>();
  REQUIRE((g[0] != 0.0 || g[1] != 0.0));
}
