// The demo jobs: a 2-layer MLP regression (SGD + momentum) and a short char-MLP run.
// Bounds were stated before measuring: the regression target has variance ~0.4, so an MSE
// below 0.01 means the MLP fits it; the char model must beat the unigram baseline by 0.5 nats.
#include <catch2/catch.hpp>

#include "experiments/demo.h"

using namespace relpos;

TEST_CASE("demo: 2-layer MLP regression with SGD reaches MSE < 0.01, deterministically", "[demo]") {
  demo::RegressionResult a = demo::train_mlp_regression(/*seed=*/3, /*steps=*/600);
  INFO("first loss " << a.losses.front() << ", final MSE " << a.final_mse);
  REQUIRE(a.losses.front() > 0.1);  // starts far from the target
  REQUIRE(a.final_mse < 0.01);
  demo::RegressionResult b = demo::train_mlp_regression(3, 600);
  REQUIRE(a.losses == b.losses);    // bit-identical rerun
}

TEST_CASE("demo: char MLP on tinyshakespeare beats the unigram baseline", "[demo]") {
  demo::CharMlpConfig cfg;
  cfg.data_path = RELPOS_SOURCE_DIR "/data/tinyshakespeare.txt";
  cfg.steps = 300;
  cfg.eval_every = 300;
  cfg.batch = 64;
  demo::CharMlpResult r = demo::train_char_mlp(cfg, nullptr);
  INFO("unigram " << r.unigram_val_loss << ", val " << r.final_val_loss);
  REQUIRE(r.unigram_val_loss == Approx(3.35).margin(0.1));
  REQUIRE(r.final_val_loss < r.unigram_val_loss - 0.5);
  REQUIRE(r.sample.size() == size_t(cfg.context + cfg.sample_chars));
}

TEST_CASE("demo: a missing or empty data file is a clear error", "[demo]") {
  demo::CharMlpConfig cfg;
  cfg.data_path = "/nonexistent/relpos.txt";
  REQUIRE_THROWS_WITH(demo::train_char_mlp(cfg, nullptr), Catch::Contains("/nonexistent/relpos.txt"));
}
