// YAML config: every file in configs/ validates; each error path names file:line:column,
// the key and what was expected; --set overrides go through the same validation.
#include <catch2/catch.hpp>

#include <filesystem>

#include "trainers/config.h"

using namespace relpos;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {
train::Config parse(const std::string& y, std::vector<std::string> sets = {}) {
  return train::parse_config(y, "test.yaml", sets);
}
const char* kBase = R"(model:
  kind: decoder
  d_model: 32
  n_heads: 4
  position:
    type: t5
data:
  task: copy
  seq_len: 8
train:
  steps: 10
)";
}  // namespace

TEST_CASE("config: every file in configs/ validates", "[config]") {
  int n = 0;
  for (const auto& e : fs::directory_iterator(RELPOS_SOURCE_DIR "/configs")) {
    if (e.path().extension() != ".yaml") continue;
    INFO(e.path().string());
    REQUIRE_NOTHROW(train::load_config(e.path().string()));
    ++n;
  }
  REQUIRE(n >= 10);
}

TEST_CASE("config: defaults and values are read", "[config]") {
  train::Config c = parse(kBase);
  REQUIRE(c.model.d_model == 32);
  REQUIRE(c.model.n_layers == 2);  // default
  REQUIRE(c.model.position == "t5");
  REQUIRE(c.data.task == "copy");
  REQUIRE(c.model.vocab == c.data.vocab_size + 4);
  REQUIRE(c.optim.name == nn::optim::OptimizerKind::AdamW);
  REQUIRE(c.train.steps == 10);
}

TEST_CASE("config: unknown keys give file:line:column and a suggestion", "[config]") {
  REQUIRE_THROWS_WITH(parse("model:\n  d_modle: 32\n"),
                      Contains("test.yaml:2:3") && Contains("model.d_modle") && Contains("did you mean 'd_model'"));
  REQUIRE_THROWS_WITH(parse("trian:\n  steps: 3\n"), Contains("test.yaml:1:1") && Contains("did you mean 'train'"));
  REQUIRE_THROWS_WITH(parse("optim:\n  lr: 0.1\n  shedule: cosine\n"),
                      Contains("test.yaml:3:3") && Contains("did you mean 'schedule'"));
}

TEST_CASE("config: wrong types and out-of-range values name key, value and expectation", "[config]") {
  REQUIRE_THROWS_WITH(parse("model:\n  n_layers: two\n"),
                      Contains("test.yaml:2:13") && Contains("model.n_layers") && Contains("integer") && Contains("'two'"));
  REQUIRE_THROWS_WITH(parse("model:\n  n_layers: 0\n"), Contains("model.n_layers") && Contains("out of range"));
  REQUIRE_THROWS_WITH(parse("optim:\n  lr: -1\n"), Contains("optim.lr") && Contains("-1"));
  REQUIRE_THROWS_WITH(parse("model:\n  dropout: 1.5\n"), Contains("model.dropout"));
  REQUIRE_THROWS_WITH(parse("model:\n  kind: transformer\n"), Contains("'transformer'") && Contains("encoder, decoder"));
  REQUIRE_THROWS_WITH(parse("train:\n  nan_policy: ignore\n"), Contains("train.nan_policy") && Contains("abort, skip"));
  REQUIRE_THROWS_WITH(parse("model: 3\n"), Contains("'model' must be a mapping"));
  REQUIRE_THROWS_WITH(parse("model:\n  d_model: [1, 2]\n"), Contains("model.d_model") && Contains("list"));
  REQUIRE_THROWS_WITH(parse("model: {\n"), Contains("test.yaml") && Contains("invalid YAML"));
}

TEST_CASE("config: cross-field checks", "[config]") {
  REQUIRE_THROWS_WITH(parse("model:\n  d_model: 30\n  n_heads: 4\n"),
                      Contains("model.d_model (30)") && Contains("model.n_heads (4)"));
  REQUIRE_THROWS_WITH(parse("model:\n  kind: encoder\ndata:\n  task: text\n"), Contains("must be 'decoder'"));
  REQUIRE_THROWS_WITH(parse("model:\n  kind: encoder\ndata:\n  task: addition\n  vocab_size: 12\n"),
                      Contains("addition") || Contains("encoder"));
  REQUIRE_THROWS_WITH(parse("model:\n  position:\n    type: learned\n  max_len: 16\ndata:\n  task: text\n  seq_len: 64\n"),
                      Contains("model.max_len (16)") && Contains("extrapolate"));
  REQUIRE_THROWS_WITH(parse("optim:\n  warmup: 20\ntrain:\n  steps: 10\n"), Contains("optim.warmup (20)"));
  REQUIRE_THROWS_WITH(parse("model:\n  position:\n    type: t5\n    num_bucket: 32\n"),
                      Contains("model.position") && Contains("did you mean 'num_buckets'"));
  REQUIRE_THROWS_WITH(parse("model:\n  position:\n    type: rope\n    base: ten\n"), Contains("'ten'"));
  REQUIRE_THROWS_WITH(parse("model:\n  position:\n    type: alibj\n"), Contains("did you mean 'alibi'"));
  // cuda is a valid choice (checked against the machine when training starts), tpu is not
  REQUIRE(parse("train:\n  device: cuda\n  allow_tf32: true\n").train.allow_tf32);
  REQUIRE_THROWS_WITH(parse("train:\n  device: tpu\n"), Contains("train.device") && Contains("cpu, cuda"));
  REQUIRE_THROWS_WITH(parse("train:\n  allow_tf32: maybe\n"), Contains("train.allow_tf32"));
}

TEST_CASE("config: --set overrides are validated the same way and named in errors", "[config]") {
  train::Config c = parse(kBase, {"model.n_layers=4", "model.position.type=alibi", "optim.lr=0.01"});
  REQUIRE(c.model.n_layers == 4);
  REQUIRE(c.model.position == "alibi");
  REQUIRE(c.optim.lr == 0.01);
  REQUIRE_THAT(c.yaml, Contains("n_layers: 4"));  // the effective config is what gets saved
  REQUIRE_THROWS_WITH(parse(kBase, {"model.n_layers=zero"}),
                      Contains("--set model.n_layers=zero") && Contains("integer"));
  REQUIRE_THROWS_WITH(parse(kBase, {"model.n_layerz=3"}), Contains("did you mean 'n_layers'"));
  REQUIRE_THROWS_WITH(parse(kBase, {"n_layers"}), Contains("expected key=value"));
  REQUIRE_THROWS_WITH(parse(kBase, {"model.d_model.x=3"}), Contains("not a section"));
}

TEST_CASE("config: a missing config file is a clear error", "[config]") {
  REQUIRE_THROWS_WITH(train::load_config("/nonexistent/cfg.yaml"), Contains("/nonexistent/cfg.yaml"));
}

TEST_CASE("config: structured tasks and index-based encodings are checked together", "[config]") {
  REQUIRE_THROWS_WITH(parse("model:\n  kind: decoder\ndata:\n  task: graph\n"), Contains("must be 'encoder'"));
  REQUIRE_THROWS_WITH(parse("model:\n  kind: encoder\n  position:\n    type: graph_spd\ndata:\n  task: sort\n"),
                      Contains("data.task 'graph'"));
  REQUIRE_THROWS_WITH(parse("model:\n  kind: encoder\n  position:\n    type: relative_2d\n    grid_h: 2\n    grid_w: 2\n"
                            "data:\n  task: patch_grid\n  grid_h: 3\n  grid_w: 2\n"),
                      Contains("must match data.grid_h/grid_w"));
  REQUIRE_THROWS_WITH(parse("model:\n  kind: decoder\n  position:\n    type: relative_2d\n    grid_h: 2\n    grid_w: 2\n"),
                      Contains("encoder"));
}

TEST_CASE("config: the bias scale on an encoder-only encoding keeps the encoder bidirectional", "[config]") {
  // The check "does this encoding add a bias for alpha to scale" once probed with a causal
  // geometry, so relative_2d (encoder-only) was refused as if the encoder were causal.
  const std::string cfg = RELPOS_SOURCE_DIR "/configs/vision_patch_2d.yaml";
  train::Config c;
  REQUIRE_NOTHROW(c = train::load_config(cfg, {"model.bias_scale.enabled=true", "model.bias_scale.per_head=true"}));
  CHECK(c.model.bias_scale.enabled);
  // ... and an encoding without an additive bias is still refused, naming the key
  REQUIRE_THROWS_WITH(parse(kBase, {"model.position.type=rope", "model.bias_scale.enabled=true"}),
                      Contains("model.bias_scale.enabled") && Contains("rope"));
}

TEST_CASE("config: a second YAML document and an alias bomb are refused", "[config]") {
  REQUIRE_THROWS_WITH(parse(std::string(kBase) + "---\ntrain: {steps: 99}\n"), Contains("second YAML document"));
  // A stray top-level ',' once made yaml-cpp's LoadAll build empty documents without end (fuzz_config):
  // it must be an error that names the line, quickly.
  REQUIRE_THROWS_WITH(parse(","), Contains("second YAML document"));
  REQUIRE_THROWS_WITH(parse(std::string(kBase) + ",\n"), Contains("test.yaml:") && Contains("YAML"));
  std::string bomb = "x0: &x0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (int i = 1; i < 9; ++i) {
    const std::string id = std::to_string(i), prev = std::to_string(i - 1);
    bomb += "x";
    bomb += id;
    bomb += ": &x";
    bomb += id;
    bomb += " [*x";
    bomb += prev;
    for (int k = 1; k < 10; ++k) bomb += ", *x", bomb += prev;
    bomb += "]\n";
  }
  REQUIRE_THROWS_WITH(parse(std::string(kBase) + bomb), Contains("alias bomb"));
}
