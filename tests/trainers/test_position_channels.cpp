// Per-token position channels (data.position_channels): the token-file tasks copy the named
// token-scope channels of every token they batch into Batch::positions [B, L, P] (padding 0), the
// model gets the names (ModelConfig::position_channels, PositionConfig::channels) and the tensor
// (AttnGeometry::positions); a missing or per-example channel, a bad list and a tensor of the wrong
// shape are clear errors naming the file, channel or key.
#include <catch2/catch.hpp>
#include <filesystem>

#include "../helpers.h"
#include "core/error.h"
#include "nn/models.h"
#include "nn/positional/registry.h"
#include "trainers/config.h"
#include "trainers/data/data.h"
#include "trainers/data/token_file.h"

using namespace relpos;
using namespace relpos::train;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

std::string tmp_dir(const std::string& name) { return test::scratch_dir("relpos_poschan_" + name); }

// n tokens whose value is their index in the file (so a batch's tokens say where they came from),
// examples of `len` tokens; channels `time` = 3 * index and `tag` = index % 5 per token, and an
// example-scope `label`.
void write_indexed(const std::string& path, int64_t n, int64_t len) {
  std::vector<int64_t> toks;
  std::vector<uint64_t> starts;
  std::vector<int32_t> time, tag, label;
  for (int64_t i = 0; i < n; ++i) {
    if (i % len == 0) starts.push_back(uint64_t(i)), label.push_back(int32_t(starts.size() % 2));
    toks.push_back(i);
    time.push_back(int32_t(3 * i));
    tag.push_back(int32_t(i % 5));
  }
  write_token_file(path, uint64_t(n), toks, starts, {},
                   {{"time", ChannelScope::Token, 0, int32_t(3 * n)},
                    {"tag", ChannelScope::Token, 0, 4},
                    {"label", ChannelScope::Example, 0, 1}},
                   {time, tag, label});
}

std::string config(const std::string& task, const std::string& path, const std::string& extra = "") {
  return "model: {kind: " + std::string(task == "tokens" ? "decoder" : "encoder") +
         ", d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32, max_len: 64}\n"
         "data: {task: " + task + ", path: " + path + ", seq_len: 12, batch_size: 3, val_fraction: 0.25" + extra +
         "}\n";
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("data.position_channels: tokens batches carry the named channels of the tokens they hold, in order",
          "[data][tokens][positions]") {
  const std::string d = tmp_dir("tokens"), p = d + "/t.rptok";
  write_indexed(p, 400, 40);
  Config cfg = parse_config(config("tokens", p, ", position_channels: [tag, time]"), "test");
  CHECK(cfg.model.position_channels == std::vector<std::string>{"tag", "time"});
  CHECK(nn::position_config(cfg.model).channels == std::vector<std::string>{"tag", "time"});
  auto ds = make_dataset(cfg);
  Generator g(5);
  for (int i = 0; i < 4; ++i) {
    const Batch b = i % 2 ? ds->train_batch(g) : ds->val_batch(i, 20);
    const int64_t L = b.input.size(1);
    REQUIRE(b.positions.shape() == Shape{3, L, 2});
    const auto x = b.input.to_vector<int64_t>(), pos = b.positions.to_vector<int64_t>();
    for (size_t k = 0; k < x.size(); ++k) {
      CHECK(pos[2 * k] == x[k] % 5);
      CHECK(pos[2 * k + 1] == 3 * x[k]);
    }
  }
  // Without the key: no positions.
  Config plain = parse_config(config("tokens", p), "test");
  Generator g2(5);
  CHECK_FALSE(make_dataset(plain)->train_batch(g2).positions.defined());
  fs::remove_all(d);
}

TEST_CASE("data.position_channels: token_labels rows carry them for real tokens and 0 for padding",
          "[data][tokens][positions]") {
  const std::string d = tmp_dir("labels"), p = d + "/l.rptok";
  write_indexed(p, 90, 9);  // examples of 9 tokens, rows of 12: 3 padding positions each
  Config cfg = parse_config(config("token_labels", p, ", position_channels: [time]"), "test");
  auto ds = make_dataset(cfg);
  Generator g(2);
  const Batch b = ds->train_batch(g);
  REQUIRE(b.positions.shape() == Shape{3, 12, 1});
  const auto x = b.input.to_vector<int64_t>(), pos = b.positions.to_vector<int64_t>(),
             pad = b.padding.to_vector<int64_t>();
  for (size_t k = 0; k < x.size(); ++k) CHECK(pos[k] == (pad[k] ? 0 : 3 * x[k]));
  CHECK(pad[11] == 1);
  // The model takes the batch: its input's positions have the declared columns.
  cfg.model.vocab = ds->vocab_size();
  nn::Model m(cfg.model, 1);
  CHECK(m.logits(b.model_input()).shape() == Shape{3, 12, 90});
  nn::ModelInput wrong = b.model_input();
  wrong.positions = Tensor::zeros({3, 12, 2}, DType::I64);
  CHECK_THAT(error_of([&] { (void)m.logits(wrong); }),
             Contains("position channels must be int64 [B, L, P] = [3, 12, 1]") && Contains("[time]"));
  fs::remove_all(d);
}

TEST_CASE("data.position_channels: a missing, per-example or mistyped channel is a clear error",
          "[data][tokens][positions][hostile]") {
  const std::string d = tmp_dir("bad"), p = d + "/t.rptok";
  write_indexed(p, 400, 40);
  auto build = [&](const std::string& extra, const std::string& task = "tokens") {
    return error_of([&] { (void)make_dataset(parse_config(config(task, p, extra), "test.yaml")); });
  };
  CHECK_THAT(build(", position_channels: [row]"),
             Contains("token file '" + p + "' has no channel 'row'") && Contains("time, tag, label"));
  CHECK_THAT(build(", position_channels: [label]"), Contains("channel 'label'") && Contains("per token"));
  CHECK_THAT(build(", position_channels: [time, time]"), Contains("'time' is listed twice"));
  CHECK_THAT(build(", position_channels: ['a b']"), Contains("entry 0 is not a name"));
  CHECK_THAT(error_of([&] {
               (void)parse_config("data: {task: copy, position_channels: [time]}\nmodel: {kind: decoder}\n", "t.yaml");
             }),
             Contains("data.position_channels") && Contains("'copy'"));
  // A validation file without the channel: named.
  write_token_file(d + "/v.rptok", 400, std::vector<int64_t>(100, 1), {0, 50});
  CHECK_THAT(build(", position_channels: [time], val_path: " + d + "/v.rptok"),
             Contains("token file '" + d + "/v.rptok' has no channel 'time'"));
  // An encoding asking for a channel the data does not carry.
  nn::PositionConfig pc;
  pc.type = "x";
  pc.channels = {"row", "col"};
  CHECK_THAT(error_of([&] { (void)nn::channel_column(pc, "time"); }),
             Contains("position 'x' reads the per-token position channel 'time'") && Contains("[row, col]"));
  CHECK(nn::channel_column(pc, "col") == 1);
  fs::remove_all(d);
}
