// train.precision bf16 | fp16 (emulated autocast, autograd/autocast.h): a short run stays close
// to float32 without being it; fp16's dynamic loss scaling skips overflowing steps and halves
// the scale; resume continues bit-exactly with the scaler's state.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "trainers/io/checkpoint.h"
#include "trainers/trainer.h"

using namespace relpos;
using namespace relpos::train;
namespace fs = std::filesystem;

namespace {

std::string tmp_run(const std::string& name) {
  std::string d = (fs::temp_directory_path() / ("relpos_prec_" + name)).string();
  fs::remove_all(d);
  return d;
}

Config run_config(const std::string& dir, const std::string& precision, const std::string& extra = "",
                  const std::string& model_extra = "") {
  return parse_config(R"(model:
)" + model_extra + R"(  d_model: 32
  n_layers: 2
  n_heads: 4
  d_ff: 64
  dropout: 0.1
  position:
    type: t5
data:
  task: copy
  vocab_size: 8
  seq_len: 6
  batch_size: 8
optim:
  lr: 3.0e-3
  warmup: 5
train:
  steps: 30
  eval_every: 10
  eval_batches: 2
  log_every: 5
  checkpoint_every: 10
  keep_last: 0
  seed: 7
  precision: )" + precision +
                          "\n" + extra + "output:\n  dir: " + dir + "\n",
                      "precision.yaml");
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST_CASE("precision: bf16 and fp16 runs stay within a stated tolerance of float32 but are not it", "[precision]") {
  const auto fp32 = train::train(run_config(tmp_run("fp32"), "fp32"));
  const auto bf16 = train::train(run_config(tmp_run("bf16"), "bf16"));
  const auto fp16 = train::train(run_config(tmp_run("fp16"), "fp16"));
  REQUIRE(fp32.losses.size() == 30);
  // bf16 keeps 8 significant bits (relative rounding 2^-9), fp16 11 (2^-12): over 30 steps of
  // this model the per-step losses (~2) stay within 0.05 and 0.01 of float32
  CHECK(max_abs_diff(bf16.losses, fp32.losses) < 0.05);
  CHECK(max_abs_diff(fp16.losses, fp32.losses) < 0.01);
  CHECK(bf16.losses != fp32.losses);
  CHECK(fp16.losses != fp32.losses);
  CHECK(fp16.overflow_steps == 0);
}

TEST_CASE("precision: fp16 skips the steps whose scaled gradients overflow and halves the loss scale", "[precision]") {
  // 2^24 times the loss overflows float16 in the backward (the logits' gradient alone is ~2^24 / 48)
  const std::string dir = tmp_run("overflow");
  const auto r = train::train(run_config(dir, "fp16", "  loss_scale_init: 16777216\n"));
  CHECK(r.overflow_steps >= 1);
  CHECK(r.overflow_steps < 10);
  CHECK(int64_t(r.losses.size()) == 30 - r.overflow_steps);  // the overflow steps made no update
  for (double l : r.losses) CHECK(std::isfinite(l));
  std::ifstream m(dir + "/metrics.jsonl");
  int overflow_rows = 0;
  double last_scale = 0;
  for (std::string line; std::getline(m, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("overflow")) {
      ++overflow_rows;
      // where the backward overflowed: "layer=count ..." ("decoder.blocks.1=12 head=3")
      REQUIRE(j.contains("nonfinite_grads"));
      std::istringstream where(j["nonfinite_grads"].get<std::string>());
      int layers = 0;
      for (std::string item; where >> item; ++layers) {
        INFO(item);
        const size_t eq = item.find('=');
        REQUIRE(eq != std::string::npos);
        const std::string layer = item.substr(0, eq);
        CHECK(std::stoll(item.substr(eq + 1)) > 0);
        const bool indexed = std::isdigit(static_cast<unsigned char>(layer.back())) != 0;
        CHECK((layer.find("blocks.") == std::string::npos || indexed));
      }
      CHECK(layers > 0);
    }
    if (j.contains("loss_scale")) last_scale = j["loss_scale"].get<double>();
  }
  CHECK(overflow_rows == r.overflow_steps);
  CHECK(last_scale == 16777216.0 / double(int64_t(1) << r.overflow_steps));
}

TEST_CASE("precision: resume continues bit-exactly in bf16 and in fp16 (loss scale included)", "[precision][resume]") {
  for (std::string p : {"bf16", "fp16"}) {
    INFO(p);
    // fp16: a short growth interval so the scale changes before and after the checkpoint
    const std::string extra = p == "fp16" ? "  loss_scale_init: 1024\n  loss_scale_interval: 4\n" : "";
    const std::string full_dir = tmp_run("full_" + p), resumed_dir = tmp_run("resumed_" + p);
    const auto full = train::train(run_config(full_dir, p, extra));
    fs::create_directories(resumed_dir + "/checkpoints");
    fs::copy(checkpoint_dir(full_dir, 10), checkpoint_dir(resumed_dir, 10), fs::copy_options::recursive);
    TrainOptions opt;
    opt.resume = resumed_dir;
    const auto resumed = train::train(run_config(resumed_dir, p, extra), opt);
    REQUIRE(resumed.losses.size() == 20);
    CHECK(resumed.losses == std::vector<double>(full.losses.begin() + 10, full.losses.end()));
  }
}

TEST_CASE("precision: the logit-growth monitor counts the query rows whose largest |logit| passes the threshold",
          "[precision][monitors]") {
  // Rows above t: every row at t = 0, none at t = the layer's max |logit| (strictly above), some
  // just below it — on the fused kernel and the materialised reference path alike.
  for (std::string attention : {"fused", "reference"}) {
    INFO(attention);
    auto rows = [&](const std::string& name, double t) {
      const std::string dir = tmp_run(name + attention);
      // only the threshold differs: the same trajectory
      train::train(
          run_config(dir, "fp32", fmt::format("  logit_threshold: {:.17g}\n", t), "  attention: " + attention + "\n"));
      std::ifstream m(dir + "/metrics.jsonl");
      std::string line;
      std::getline(m, line);  // step 5, the first logging step
      return nlohmann::json::parse(line);
    };
    const auto all = rows("t0", 0.0);
    REQUIRE(all.contains("attn_rows_above_threshold"));
    const auto max_logit = all["max_attn_logit"].get<std::vector<double>>();
    for (double f : all["attn_rows_above_threshold"].get<std::vector<double>>()) CHECK(f == 1.0);
    const double layer0 = max_logit[0];
    const auto at_max = rows("tmax", layer0);
    CHECK(at_max["attn_rows_above_threshold"][0].get<double>() == 0.0);
    const auto below = rows("tbelow", layer0 * (1 - 1e-6));
    const double f = below["attn_rows_above_threshold"][0].get<double>();
    CHECK(f > 0.0);
    CHECK(f < 1.0);
  }
}
