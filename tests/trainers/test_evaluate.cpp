// Per-position evaluation (trainers/evaluate.h): a hand-computed accumulation and summary,
// the window plans of the two protocols, and a model run where the random protocol must
// agree with the trainer's evaluate().
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "trainers/evaluate.h"
#include "trainers/trainer.h"

using namespace relpos;
using train::kIgnore;

TEST_CASE("eval: per-position losses, buckets and beyond-train-length loss by hand", "[eval]") {
  const double l3 = std::log(3.0);
  // logits [B=2, L=3, V=2]
  std::vector<double> lg = {0, 0, l3, 0, 0, 0,  // batch 0
                            5, 5, 0, l3, 2, 0};  // batch 1
  std::vector<int64_t> tg = {0, 1, 1,            // batch 0
                             kIgnore, 1, 0};     // batch 1
  train::PositionAccumulator acc;
  acc.add(Tensor::from_vector(lg, {2, 3, 2}), Tensor::from_vector(tg, {2, 3}));
  // hand: -log softmax of the target
  const double a = std::log(2.0);              // [0,0] -> either class
  const double b = std::log(4.0);              // [ln3, 0] -> class 1: log(3+1) - 0
  const double c = std::log(4.0) - l3;         // [0, ln3] -> class 1
  const double d = std::log(1 + std::exp(-2.0));  // [2, 0] -> class 0
  REQUIRE(acc.count == std::vector<int64_t>{1, 2, 2});
  CHECK(acc.loss_sum[0] == Approx(a));
  CHECK(acc.loss_sum[1] == Approx(b + c));
  CHECK(acc.loss_sum[2] == Approx(a + d));
  // argmax hits (a tie counts as a hit): pos0 1, pos1 1 of 2 (b misses), pos2 2
  CHECK(acc.correct == std::vector<double>{1, 1, 2});

  train::PositionEval e = train::summarize(acc, /*bucket=*/2, /*train_len=*/2);
  REQUIRE(e.buckets.size() == 2);
  CHECK(e.buckets[0].lo == 0);
  CHECK(e.buckets[0].hi == 2);
  CHECK(e.buckets[0].tokens == 3);
  CHECK(e.buckets[0].loss == Approx((a + b + c) / 3));
  CHECK(e.buckets[1].tokens == 2);
  CHECK(e.buckets[1].loss == Approx((a + d) / 2));
  CHECK(e.beyond_tokens == 2);
  CHECK(e.beyond_loss == Approx((a + d) / 2));
  CHECK(e.tokens == 5);
  CHECK(e.loss == Approx((2 * a + b + c + d) / 5));
  CHECK(e.accuracy == Approx(4.0 / 5));
  CHECK(e.position_loss[1] == Approx((b + c) / 2));
  // nothing beyond a training length of 3
  CHECK(std::isnan(train::summarize(acc, 3, 3).beyond_loss));
}

TEST_CASE("eval: window plans score every target once (windows and sliding)", "[eval]") {
  auto w = train::plan_windows(10, 4, 4, 0);  // non-overlapping
  REQUIRE(w.size() == 2);
  CHECK(w[0].start == 0);
  CHECK(w[1].start == 4);
  CHECK(w[1].score_from == 0);
  auto s = train::plan_windows(10, 4, 2, 0);  // sliding, stride 2
  REQUIRE(s.size() == 3);
  CHECK(s[1].start == 2);
  CHECK(s[1].score_from == 2);
  CHECK(s[2].start == 4);
  std::multiset<int64_t> scored;  // the stream index of each scored target
  for (auto& x : s)
    for (int64_t t = x.score_from; t < 4; ++t) scored.insert(x.start + t + 1);
  CHECK(scored == std::multiset<int64_t>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(train::plan_windows(10, 4, 4, 5).size() == 2);  // stops once 5 tokens are scored
  CHECK(train::plan_windows(10, 4, 4, 4).size() == 1);
  CHECK_THROWS(train::plan_windows(4, 4, 4, 0));        // no room for a shifted target
  CHECK_THROWS(train::plan_windows(10, 4, 5, 0));       // stride > L
}

TEST_CASE("eval: random mode equals the trainer's evaluate(), windows mode counts every token", "[eval]") {
  train::Config cfg = train::parse_config(R"(model: {d_model: 16, n_layers: 1, n_heads: 2, position: {type: alibi}}
data: {task: text, path: data/tinyshakespeare.txt, seq_len: 16, batch_size: 4}
train: {eval_batches: 3})", "test");
  auto data = train::make_dataset(cfg);
  cfg.model.vocab = data->vocab_size();
  nn::Model model(cfg.model, 3);
  model.eval();
  train::EvalOptions o;
  o.mode = "random";
  auto r = train::evaluate_positions(model, *data, cfg, o);
  auto ref = train::evaluate(model, *data, cfg, 16);
  CHECK(r.loss == Approx(ref.loss).epsilon(1e-6));
  CHECK(r.accuracy == Approx(ref.accuracy));
  CHECK(r.tokens == ref.tokens);
  o.mode = "windows";
  o.seq_len = 32;
  o.bucket = 8;
  o.max_tokens = 200;  // 7 windows of 32
  auto w = train::evaluate_positions(model, *data, cfg, o);
  CHECK(w.mode == "windows");
  CHECK(w.windows == 7);
  CHECK(w.tokens == 7 * 32);
  REQUIRE(w.buckets.size() == 4);
  for (auto& b : w.buckets) CHECK(b.tokens == 7 * 8);
  CHECK(w.beyond_tokens == 7 * 16);
  o.mode = "sliding";
  o.stride = 8;
  auto s = train::evaluate_positions(model, *data, cfg, o);
  CHECK(s.stride == 8);
  CHECK(s.buckets[0].tokens == 8);  // only the first window scores positions 0..7
  // RoPE-only switch refuses nothing here, but with_position_settings rebuilds the model
  auto copy = train::with_position_settings(model, cfg, {});
  CHECK(train::evaluate(*copy, *data, cfg, 16).loss == Approx(ref.loss));
}
