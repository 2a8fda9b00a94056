// Optimizers (nn/optim): Adam/AdamW against PyTorch 1.13 reference trajectories
// (tests/fixtures/optim_adam.json, written by tools/make_optim_fixture.py), per-group weight
// decay, LR schedules, gradient clipping, bit-exact optimizer state export/import, and a
// small Linear regression trained with AdamW + clipping + a warmup-cosine schedule.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <numbers>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "kernels/ops.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/optim/adam.h"
#include "nn/optim/clip.h"
#include "nn/optim/param_groups.h"
#include "nn/optim/schedule.h"
#include "nn/optim/sgd.h"

using namespace relpos;
using namespace relpos::nn::optim;
using Catch::Contains;

namespace {

Tensor f64(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector(v, s); }

Variable param(const std::vector<double>& v, const Shape& s) { return Variable(f64(v, s), true); }

// ---------------------------------------------------------------- (a) PyTorch fixtures

nlohmann::json load_fixture() {
  std::ifstream f(RELPOS_SOURCE_DIR "/tests/fixtures/optim_adam.json");
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}

// Replays one fixture case: same initial params, groups, grads and lr changes; after every
// step each parameter must match PyTorch's to 1e-12 relative (|a - b| <= 1e-12 |b| + 1e-15).
void replay_case(const nlohmann::json& c) {
  const std::string name = c["name"];
  INFO("case " << name);
  std::vector<ParamGroup> groups;
  std::vector<Variable> all;
  for (const auto& g : c["groups"]) {
    ParamGroup pg;
    pg.name = g["name"];
    pg.weight_decay = g["weight_decay"];
    pg.lr_scale = g["lr_scale"];
    for (const auto& p : g["params"]) {
      Variable v = param(p["init"].get<std::vector<double>>(), p["shape"].get<Shape>());
      pg.params.push_back(v);
      all.push_back(v);
    }
    groups.push_back(pg);
  }
  AdamOptions opt;
  opt.lr = c["lr"];
  opt.beta1 = c["beta1"];
  opt.beta2 = c["beta2"];
  opt.eps = c["eps"];
  std::unique_ptr<AdamBase> adam;
  if (c["optimizer"] == "Adam")
    adam = std::make_unique<Adam>(groups, opt);
  else
    adam = std::make_unique<AdamW>(groups, opt);
  REQUIRE(adam->decoupled_weight_decay() == (c["optimizer"] == "AdamW"));

  double worst = 0.0;
  int step = 0;
  for (const auto& s : c["steps"]) {
    adam->set_lr(s["lr"]);
    adam->zero_grad();
    for (size_t i = 0; i < all.size(); ++i)
      if (!s["grads"][i].is_null()) all[i].set_grad(f64(s["grads"][i].get<std::vector<double>>(), all[i].shape()));
    adam->step();
    for (size_t i = 0; i < all.size(); ++i) {
      std::vector<double> got = all[i].data().to_vector<double>();
      std::vector<double> want = s["params_after"][i].get<std::vector<double>>();
      REQUIRE(got.size() == want.size());
      for (size_t j = 0; j < got.size(); ++j) {
        const double err = std::abs(got[j] - want[j]);
        worst = std::max(worst, err / std::abs(want[j]));
        INFO("step " << step << " param " << i << " element " << j << ": got " << got[j] << ", torch " << want[j]);
        REQUIRE(err <= 1e-12 * std::abs(want[j]) + 1e-15);
      }
    }
    ++step;
  }
  // Skipped parameters did not advance their step count (as in PyTorch).
  std::vector<int64_t> want_steps = c["final_param_steps"].get<std::vector<int64_t>>();
  size_t k = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (size_t i = 0; i < groups[gi].params.size(); ++i) REQUIRE(adam->param_step(gi, i) == want_steps[k++]);
  INFO("case " << name << ": worst relative deviation from torch " << worst);  // ~1e-15 when written
  REQUIRE(worst <= 1e-12);
}

}  // namespace

TEST_CASE("optim: Adam matches torch.optim.Adam (L2 weight decay, groups, skipped params, lr change)", "[optim]") {
  nlohmann::json fx = load_fixture();
  bool found = false;
  for (const auto& c : fx["cases"])
    if (c["optimizer"] == "Adam") found = true, replay_case(c);
  REQUIRE(found);
}

TEST_CASE("optim: AdamW matches torch.optim.AdamW (decoupled weight decay, groups, skipped params)", "[optim]") {
  nlohmann::json fx = load_fixture();
  bool found = false;
  for (const auto& c : fx["cases"])
    if (c["optimizer"] == "AdamW") found = true, replay_case(c);
  REQUIRE(found);
}

TEST_CASE("optim: Adam/AdamW reject bad options and parameter groups with clear errors", "[optim]") {
  Variable a = param({1, 2}, {2});
  AdamOptions bad;
  bad.beta1 = 1.0;
  REQUIRE_THROWS_WITH(Adam(std::vector<Variable>{a}, bad), Contains("beta1"));
  bad = {};
  bad.lr = -1;
  REQUIRE_THROWS_WITH(AdamW(std::vector<Variable>{a}, bad), Contains("AdamW: lr"));
  REQUIRE_THROWS_WITH(Adam(std::vector<ParamGroup>{{{a}, 0.0, 1.0, "x"}, {{a}, 0.0, 1.0, "y"}}, AdamOptions{}),
                      Contains("same parameter"));
  REQUIRE_THROWS_WITH(Adam(std::vector<ParamGroup>{{{a}, 0.0, 1.0, "x"}, {{}, 0.0, 1.0, "x"}}, AdamOptions{}),
                      Contains("two parameter groups are named 'x'"));
  REQUIRE_THROWS_WITH(Adam(std::vector<ParamGroup>{{{a}, -0.1, 1.0, "x"}}, AdamOptions{}), Contains("weight_decay"));
  Adam ok(std::vector<Variable>{a}, AdamOptions{});
  REQUIRE_THROWS_WITH(ok.set_lr(std::numeric_limits<double>::quiet_NaN()), Contains("set_lr"));
  a.set_grad(f64({1, 2, 3}, {3}));
  REQUIRE_THROWS_WITH(ok.step(), Contains("does not match the parameter"));
}

// ---------------------------------------------------------------- (b) per-group weight decay

namespace {

// A module with one parameter in each tag plus a Linear child (weight: weights, bias:
// norms_biases).
class TaggedNet : public nn::Module {
 public:
  explicit TaggedNet(Generator& gen) {
    emb = register_parameter("emb", Tensor::rand({4, 3}, gen, DType::F64, 0.5, 1.5));
    pos = register_parameter("pos", Tensor::rand({5}, gen, DType::F64, 0.5, 1.5), nn::group::kPosition);
    norm = register_parameter("norm", Tensor::rand({3}, gen, DType::F64, 0.5, 1.5), nn::group::kNormsAndBiases);
    lin = register_module("lin", std::make_shared<nn::Linear>(3, 2, true, gen, DType::F64));
  }
  Variable emb, pos, norm;
  std::shared_ptr<nn::Linear> lin;
};

std::vector<Tensor> snapshot(const std::vector<Variable>& ps) {
  std::vector<Tensor> out;
  for (const Variable& p : ps) out.push_back(p.data().clone());
  return out;
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector<double>() == b.to_vector<double>();
}

void zero_grads(const std::vector<Variable>& ps) {
  for (const Variable& p : ps) p.set_grad(Tensor::zeros(p.shape(), p.dtype()));
}

}  // namespace

TEST_CASE("optim: param_groups_by_tag splits by tag and excludes position and norms/biases from decay", "[optim]") {
  Generator gen(7);
  TaggedNet net(gen);
  std::vector<ParamGroup> groups = param_groups_by_tag(net, 0.1);
  REQUIRE(groups.size() == 3);
  REQUIRE(groups[0].name == nn::group::kWeights);  // first appearance order: emb, pos, norm
  REQUIRE(groups[1].name == nn::group::kPosition);
  REQUIRE(groups[2].name == nn::group::kNormsAndBiases);
  REQUIRE(groups[0].params.size() == 2);  // emb, lin.weight
  REQUIRE(groups[0].params[1].same(net.lin->weight()));
  REQUIRE(groups[1].params.size() == 1);
  REQUIRE(groups[2].params.size() == 2);  // norm, lin.bias
  REQUIRE(groups[0].weight_decay == 0.1);
  REQUIRE(groups[1].weight_decay == 0.0);
  REQUIRE(groups[2].weight_decay == 0.0);

  std::vector<ParamGroup> all_decay = param_groups_by_tag(net, 0.1, {});
  for (const ParamGroup& g : all_decay) REQUIRE(g.weight_decay == 0.1);
  std::vector<ParamGroup> only_pos = param_groups_by_tag(net, 0.1, {nn::group::kPosition});
  REQUIRE(only_pos[2].weight_decay == 0.1);
  REQUIRE_THROWS_WITH(param_groups_by_tag(net, -1.0), Contains("weight_decay"));
}

TEST_CASE("optim: a parameter in an excluded group is not decayed (AdamW, Adam and SGD)", "[optim]") {
  Generator gen(11);
  TaggedNet net(gen);
  const std::vector<Variable> decayed{net.emb, net.lin->weight()};
  const std::vector<Variable> excluded{net.pos, net.norm, net.lin->bias()};
  AdamOptions opt;
  opt.lr = 0.1;

  SECTION("AdamW: with zero grads the update is pure decoupled decay p *= 1 - lr * wd") {
    AdamW adamw(param_groups_by_tag(net, 0.5), opt);
    std::vector<Tensor> dec0 = snapshot(decayed), exc0 = snapshot(excluded);
    zero_grads(net.parameters());
    adamw.step();
    for (size_t i = 0; i < excluded.size(); ++i) REQUIRE(bit_equal(excluded[i].data(), exc0[i]));
    for (size_t i = 0; i < decayed.size(); ++i) {
      Tensor want = dec0[i].clone();
      k::mul_(want, 1.0 - 0.1 * 0.5);  // m = v = 0, so the Adam part adds exactly 0
      REQUIRE(bit_equal(decayed[i].data(), want));
    }
  }
  SECTION("Adam: with zero grads only decayed parameters see a (coupled) gradient") {
    Adam adam(param_groups_by_tag(net, 0.5), opt);
    std::vector<Tensor> dec0 = snapshot(decayed), exc0 = snapshot(excluded);
    zero_grads(net.parameters());
    adam.step();
    for (size_t i = 0; i < excluded.size(); ++i) REQUIRE(bit_equal(excluded[i].data(), exc0[i]));
    for (size_t i = 0; i < decayed.size(); ++i) {
      // g = wd * p > 0 (params are in [0.5, 1.5)), first step moves each by ~lr towards 0
      std::vector<double> before = dec0[i].to_vector<double>(), after = decayed[i].data().to_vector<double>();
      for (size_t j = 0; j < before.size(); ++j) {
        if (before[j] <= 0) continue;  // Linear's weight is U(-b, b)
        REQUIRE(after[j] == Approx(before[j] - 0.1).epsilon(1e-6));
      }
    }
  }
  SECTION("SGD (with momentum): with zero grads the update is p -= lr * wd * p in decayed groups only") {
    SGD sgd(param_groups_by_tag(net, 0.5), SGDOptions{.lr = 0.1, .momentum = 0.9});
    std::vector<Tensor> dec0 = snapshot(decayed), exc0 = snapshot(excluded);
    zero_grads(net.parameters());
    sgd.step();
    for (size_t i = 0; i < excluded.size(); ++i) REQUIRE(bit_equal(excluded[i].data(), exc0[i]));
    for (size_t i = 0; i < decayed.size(); ++i) {
      std::vector<double> before = dec0[i].to_vector<double>(), after = decayed[i].data().to_vector<double>();
      for (size_t j = 0; j < before.size(); ++j) REQUIRE(after[j] == Approx(before[j] * (1 - 0.1 * 0.5)).epsilon(1e-6));
    }
    // its state is keyed by group, and loads back
    const OptimizerState st = sgd.state_dict();
    REQUIRE(st.size() == net.parameters().size());
    REQUIRE(st.front().first.find(".0.momentum_buffer") != std::string::npos);
    SGD again(param_groups_by_tag(net, 0.5), SGDOptions{.lr = 0.1, .momentum = 0.9});
    REQUIRE_NOTHROW(again.load_state_dict(st));
    REQUIRE_THROWS_WITH(again.load_state_dict({{"0.momentum_buffer", st.front().second}}),
                        Contains("SGD state: unexpected key '0.momentum_buffer'"));
  }
}

// ---------------------------------------------------------------- (c) schedules

TEST_CASE("optim: LR schedules match their closed forms at warmup end, midpoint and end", "[optim]") {
  const double base = 1e-3, r = 0.1;
  const int64_t W = 10, T = 110;  // decay over steps 10..110, midpoint 60
  // warmup: base * (step + 1) / W
  REQUIRE(warmup_cosine_lr(0, base, W, T, r) == Approx(base / 10).epsilon(1e-15));
  REQUIRE(warmup_cosine_lr(4, base, W, T, r) == Approx(base * 5 / 10).epsilon(1e-15));
  REQUIRE(warmup_cosine_lr(W - 1, base, W, T, r) == Approx(base).epsilon(1e-15));  // warmup end
  REQUIRE(warmup_cosine_lr(W, base, W, T, r) == Approx(base).epsilon(1e-15));      // decay start
  // cosine: base * (r + (1 - r) * 0.5 * (1 + cos(pi * progress)))
  REQUIRE(warmup_cosine_lr(60, base, W, T, r) == Approx(base * (r + (1 - r) * 0.5)).epsilon(1e-14));
  REQUIRE(warmup_cosine_lr(35, base, W, T, r) ==
          Approx(base * (r + (1 - r) * 0.5 * (1 + std::sqrt(0.5)))).epsilon(1e-14));
  REQUIRE(warmup_cosine_lr(T, base, W, T, r) == Approx(base * r).epsilon(1e-14));  // final step
  REQUIRE(warmup_cosine_lr(T + 1000, base, W, T, r) == Approx(base * r).epsilon(1e-14));
  REQUIRE(warmup_cosine_lr(T, base, W, T, 0.0) == Approx(0.0).margin(1e-20));
  // linear: base * (r + (1 - r) * (1 - progress))
  REQUIRE(warmup_linear_lr(W - 1, base, W, T, r) == Approx(base).epsilon(1e-15));
  REQUIRE(warmup_linear_lr(60, base, W, T, r) == Approx(base * 0.55).epsilon(1e-14));
  REQUIRE(warmup_linear_lr(35, base, W, T, r) == Approx(base * (r + (1 - r) * 0.75)).epsilon(1e-14));
  REQUIRE(warmup_linear_lr(T, base, W, T, r) == Approx(base * r).epsilon(1e-14));
  // no warmup: the decay starts at base on step 0
  REQUIRE(warmup_cosine_lr(0, base, 0, 100, r) == base);
  // constant (optionally after a warmup)
  REQUIRE(constant_lr(0, base) == base);
  REQUIRE(constant_lr(123456, base) == base);
  REQUIRE(constant_lr(1, base, 4) == Approx(base / 2).epsilon(1e-15));
  REQUIRE(constant_lr(4, base, 4) == base);
  // the struct form and the names agree with the free functions
  ScheduleOptions s{*parse_enum<LrSchedule>("cosine"), base, W, T, r};
  REQUIRE(lr_at(s, 60) == warmup_cosine_lr(60, base, W, T, r));
  REQUIRE(enum_name(*parse_enum<LrSchedule>("linear")) == "linear");
  // pure functions: the same step gives the same value, in any order
  REQUIRE(warmup_cosine_lr(77, base, W, T, r) == warmup_cosine_lr(77, base, W, T, r));
}

TEST_CASE("optim: LR schedules reject invalid parameters with clear errors", "[optim]") {
  REQUIRE_THROWS_WITH(warmup_cosine_lr(0, 1e-3, 10, 10), Contains("total_steps (10) must be greater than warmup_steps (10)"));
  REQUIRE_THROWS_WITH(warmup_linear_lr(0, 1e-3, 0, 10, 1.5), Contains("min_lr_ratio"));
  REQUIRE_THROWS_WITH(warmup_cosine_lr(-1, 1e-3, 0, 10), Contains("step must be >= 0"));
  REQUIRE_THROWS_WITH(constant_lr(0, 0.0), Contains("base_lr"));
  REQUIRE_THROWS_WITH(constant_lr(0, 1e-3, -2), Contains("warmup_steps"));
  REQUIRE_FALSE(parse_enum<LrSchedule>("step").has_value());
}

// ---------------------------------------------------------------- (d) clipping

TEST_CASE("optim: clip_grad_norm returns the pre-clip norm and scales to max_norm", "[optim]") {
  Variable a = param({0, 0}, {2}), b = param({0}, {1}), none = param({1, 1}, {2});
  a.set_grad(f64({3, 4}, {2}));
  b.set_grad(f64({12}, {1}));  // global norm sqrt(9 + 16 + 144) = 13
  const std::vector<Variable> ps{a, b, none};
  REQUIRE(grad_norm(ps) == 13.0);
  REQUIRE(grad_norm({a, a, b}) == 13.0);  // a parameter listed twice counts once

  SECTION("above the threshold") {
    REQUIRE(clip_grad_norm(ps, 1.3) == 13.0);
    REQUIRE(grad_norm(ps) == Approx(1.3).epsilon(1e-6));
    const double coef = 1.3 / (13.0 + 1e-6);
    REQUIRE(a.grad().to_vector<double>() == std::vector<double>{3 * coef, 4 * coef});
    REQUIRE_FALSE(none.grad().defined());
  }
  SECTION("below the threshold nothing changes") {
    Tensor ga = a.grad(), gb = b.grad();
    REQUIRE(clip_grad_norm(ps, 20.0) == 13.0);
    REQUIRE(a.grad().to_vector<double>() == std::vector<double>{3, 4});
    REQUIRE(b.grad().to_vector<double>() == std::vector<double>{12});
    REQUIRE(clip_grad_norm(ps, std::numeric_limits<double>::infinity()) == 13.0);
    REQUIRE(b.grad().to_vector<double>() == std::vector<double>{12});
  }
  SECTION("a NaN gradient: returns NaN and leaves every grad untouched") {
    b.set_grad(f64({std::numeric_limits<double>::quiet_NaN()}, {1}));
    REQUIRE(std::isnan(clip_grad_norm(ps, 1.0)));
    REQUIRE(a.grad().to_vector<double>() == std::vector<double>{3, 4});
    b.set_grad(f64({std::numeric_limits<double>::infinity()}, {1}));
    REQUIRE(std::isinf(clip_grad_norm(ps, 1.0)));
    REQUIRE(a.grad().to_vector<double>() == std::vector<double>{3, 4});
  }
  SECTION("invalid max_norm") {
    REQUIRE_THROWS_WITH(clip_grad_norm(ps, 0.0), Contains("max_norm"));
    REQUIRE_THROWS_WITH(clip_grad_norm(ps, std::numeric_limits<double>::quiet_NaN()), Contains("max_norm"));
  }
}

TEST_CASE("optim: clip_grad_norm scales grads that share a buffer exactly once", "[optim]") {
  // Two leaves holding the very same gradient tensor.
  Variable a = param({1, 2, 3}, {3}), b = param({4, 5, 6}, {3});
  Tensor shared = f64({2, 2, 2}, {3});
  a.set_grad(shared);
  b.set_grad(shared);
  const double norm = std::sqrt(6 * 4.0);
  const double g = 2.0 * (1.0 / (norm + 1e-6));
  REQUIRE(clip_grad_norm({a, b}, 1.0) == Approx(norm).epsilon(1e-15));
  REQUIRE(a.grad().to_vector<double>() == std::vector<double>{g, g, g});
  REQUIRE(b.grad().to_vector<double>() == std::vector<double>{g, g, g});
  // The engine does this for both inputs of an add (it did when this test was written).
  a.zero_grad();
  b.zero_grad();
  sum((a + b) * 2.0).backward();  // d/da = d/db = 2
  REQUIRE(clip_grad_norm({a, b}, 1.0) == Approx(norm).epsilon(1e-15));
  REQUIRE(a.grad().to_vector<double>() == std::vector<double>{g, g, g});
  REQUIRE(b.grad().to_vector<double>() == std::vector<double>{g, g, g});
  // A stride-0 (expanded) grad is scaled element-wise, not once per alias.
  Variable c = param({0, 0, 0, 0}, {4});
  c.set_grad(f64({2}, {1}).expand({4}));
  clip_grad_norm({c}, 2.0);  // norm 4
  REQUIRE(c.grad().to_vector<double>()[3] == Approx(1.0).epsilon(1e-6));
}

TEST_CASE("optim: grad_norm accumulates float32 grads in double", "[optim]") {
  Variable p(Tensor::zeros({100000}, DType::F32), true);
  p.set_grad(Tensor::full({100000}, 0.1, DType::F32));
  const double x = double(0.1f);
  // sequential float32 accumulation would be off by ~3e-4 relative here; double by ~1e-12 at most
  REQUIRE(grad_norm({p}) == Approx(std::sqrt(100000 * x * x)).epsilon(1e-10));
}

// ---------------------------------------------------------------- (e) state export/import

namespace {

// The fixed gradient of parameter i at step s (seeded, so any replay gets the same one).
Tensor grad_at(int step, size_t i, const Shape& shape) {
  Generator g(1000 + 17 * uint64_t(step) + uint64_t(i));
  return Tensor::randn(shape, g, DType::F64);
}

void take_steps(AdamBase& opt, const std::vector<Variable>& ps, int from, int to) {
  for (int s = from; s < to; ++s) {
    opt.zero_grad();
    for (size_t i = 0; i < ps.size(); ++i)
      if (!(i == 2 && s == 1)) ps[i].set_grad(grad_at(s, i, ps[i].shape()));  // p2 skips step 1
    opt.step();
  }
}

std::vector<ParamGroup> two_groups(const std::vector<Variable>& ps) {
  return {ParamGroup{{ps[0], ps[1]}, 0.1, 1.0, "decay"}, ParamGroup{{ps[2]}, 0.0, 0.5, "no_decay"}};
}

}  // namespace

TEST_CASE("optim: exported Adam state resumes bit-identically", "[optim]") {
  Generator gen(5);
  std::vector<Variable> ps{Variable(Tensor::randn({4, 3}, gen, DType::F64), true),
                           Variable(Tensor::randn({3}, gen, DType::F64), true),
                           Variable(Tensor::randn({2, 2}, gen, DType::F64), true)};
  AdamOptions opt;
  opt.lr = 0.01;
  AdamW a(two_groups(ps), opt);
  take_steps(a, ps, 0, 3);
  OptimizerState s3 = a.state_dict();
  std::vector<Tensor> p3 = snapshot(ps);
  REQUIRE(s3.size() == 9);
  REQUIRE(s3[0].first == "decay.0.step");
  REQUIRE(s3[0].second.item() == 3);
  REQUIRE(s3[7].first == "no_decay.0.exp_avg");
  REQUIRE(s3[6].second.item() == 2);  // no_decay.0 skipped one step
  take_steps(a, ps, 3, 5);

  std::vector<Variable> qs;
  for (const Tensor& t : p3) qs.push_back(Variable(t.clone(), true));
  AdamW b(two_groups(qs), opt);
  b.load_state_dict(s3);
  take_steps(b, qs, 3, 5);
  for (size_t i = 0; i < ps.size(); ++i) REQUIRE(bit_equal(ps[i].data(), qs[i].data()));
  OptimizerState sa = a.state_dict(), sb = b.state_dict();
  REQUIRE(sa.size() == sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    REQUIRE(sa[i].first == sb[i].first);
    REQUIRE(bit_equal(sa[i].second, sb[i].second));
  }
  // The exported copy did not move with the optimizer.
  REQUIRE(s3[0].second.item() == 3);

  SECTION("a fresh optimizer exports zero moments and step 0") {
    AdamW fresh(two_groups(qs), opt);
    OptimizerState s0 = fresh.state_dict();
    REQUIRE(s0[0].second.item() == 0);
    REQUIRE(bit_equal(s0[1].second, Tensor::zeros({4, 3}, DType::F64)));
  }
  SECTION("mismatched state is rejected with the key and the shapes, and changes nothing") {
    AdamW c(two_groups(qs), opt);
    OptimizerState bad = s3;
    bad[1].second = Tensor::zeros({3, 4}, DType::F64);
    REQUIRE_THROWS_WITH(c.load_state_dict(bad),
                        Contains("'decay.0.exp_avg' has shape [3, 4] in the state, [4, 3] in the parameter"));
    REQUIRE(c.param_step(0, 0) == 0);
    bad = s3;
    bad.pop_back();
    REQUIRE_THROWS_WITH(c.load_state_dict(bad), Contains("missing key 'no_decay.0.exp_avg_sq'"));
    bad = s3;
    bad.emplace_back("decay.7.step", Tensor::scalar(1, DType::I64));
    REQUIRE_THROWS_WITH(c.load_state_dict(bad), Contains("unexpected key 'decay.7.step'"));
    bad = s3;
    bad[0].second = Tensor::scalar(3, DType::F64);
    REQUIRE_THROWS_WITH(c.load_state_dict(bad), Contains("'decay.0.step' must be an int64 0-d tensor"));
    bad = s3;
    bad[2].second = Tensor::zeros({4, 3}, DType::F32);
    REQUIRE_THROWS_WITH(c.load_state_dict(bad), Contains("'decay.0.exp_avg_sq' is float32 [4, 3]"));
    bad = s3;
    bad.push_back(s3[0]);
    REQUIRE_THROWS_WITH(c.load_state_dict(bad), Contains("'decay.0.step' given twice"));
    REQUIRE(c.param_step(0, 0) == 0);
  }
}

// ---------------------------------------------------------------- (f) training

TEST_CASE("optim: a Linear regression trained with AdamW + clipping + cosine schedule converges", "[optim]") {
  // Bound stated before running: a student Linear(8 -> 3) fits a teacher Linear(8 -> 3) on
  // a fixed batch of 256 inputs in U(-1, 1). The initial MSE is ~0.2 (two independent
  // random layers, outputs of variance ~0.1 each); after 400 full-batch AdamW steps (lr
  // 0.05, 20 warmup steps, cosine to 0.1x, weight decay 0.01 on the weight only, clipping
  // at 1.0) the MSE must be below 1e-3 and below 1% of the initial MSE.
  Generator gen(2024);
  nn::Linear teacher(8, 3, true, gen, DType::F64);
  nn::Linear student(8, 3, true, gen, DType::F64);
  Variable x(Tensor::rand({256, 8}, gen, DType::F64, -1.0, 1.0), false);
  Tensor y;
  {
    NoGradGuard ng;
    y = teacher.forward(x).data();
  }
  Variable target(y, false);
  std::vector<ParamGroup> groups = param_groups_by_tag(student, 0.01);
  REQUIRE(groups.size() == 2);
  REQUIRE(groups[1].weight_decay == 0.0);  // the bias is not decayed
  AdamOptions opt;
  AdamW adamw(groups, opt);
  const ScheduleOptions sched{LrSchedule::WarmupCosine, 0.05, 20, 400, 0.1};
  std::vector<double> losses;
  for (int64_t step = 0; step < 400; ++step) {
    adamw.set_lr(lr_at(sched, step));
    adamw.zero_grad();
    Variable diff = student.forward(x) - target;
    Variable loss = mean(diff * diff);
    loss.backward();
    const double norm = clip_grad_norm(student.parameters(), 1.0);
    REQUIRE(std::isfinite(norm));
    adamw.step();
    losses.push_back(loss.item());
  }
  Variable diff = student.forward(x) - target;
  const double final_loss = mean(diff * diff).item();
  INFO("initial MSE " << losses.front() << ", final MSE " << final_loss);
  REQUIRE(losses.front() > 0.05);
  REQUIRE(final_loss < 1e-3);
  REQUIRE(final_loss < 0.01 * losses.front());
}
