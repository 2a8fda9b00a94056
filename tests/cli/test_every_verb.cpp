// "every verb on every encoding": each registered position encoding is trained a few steps
// from the config in configs/ that uses it, then every verb that reads a run is run on it —
// resume, eval (beyond the training length where the task has lengths), inspect, report,
// sample (decoders on text) — and gradcheck on the encoding itself. Each must exit 0 and
// write what it says; a verb that does not apply must refuse with a clear error (exit 2),
// never crash. The list is the registry, not a hand-written one.
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "../cli_run.h"
#include "nn/positional/registry.h"
#include "trainers/config.h"

using namespace relpos;
namespace fs = std::filesystem;

namespace {

using Result = test::CliRun;
Result cli(const std::string& args) { return test::cli_run("--threads 1 " + args); }

// The config in configs/ (top level) that trains each encoding; the first one by file name.
std::map<std::string, fs::path> config_per_encoding() {
  std::map<std::string, fs::path> out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(RELPOS_SOURCE_DIR "/configs"))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) out.emplace(train::load_config(f.string()).model.position, f);
  return out;
}

}  // namespace

TEST_CASE("cli: every verb on every encoding", "[cli][every_verb]") {
  const auto configs = config_per_encoding();
  int n = 0;
  for (const auto& variant : nn::position_variants()) {
    const std::string& name = variant.name;
    DYNAMIC_SECTION(name) {
      auto it = configs.find(name);
      if (it == configs.end()) FAIL("configs/ has no config that trains position encoding '" << name << "'");
      const train::Config cfg = train::load_config(it->second.string());
      const std::string dir = (fs::temp_directory_path() / ("every_verb_" + name)).string();
      fs::remove_all(dir);
      const std::string small = " --set train.steps=4 --set train.eval_every=2 --set train.eval_batches=1"
                                " --set optim.warmup=1 --set train.log_every=1 --set train.checkpoint_every=2 --set output.dir=" + dir;
      INFO("config " << it->second.string());

      Result r = cli("train " + it->second.string() + small);
      INFO("train: " << r.out);
      REQUIRE(r.code == 0);
      REQUIRE(fs::exists(dir + "/metrics.jsonl"));

      r = cli("train " + it->second.string() + small + " --set train.steps=6 --resume " + dir);
      INFO("resume: " << r.out);
      REQUIRE(r.code == 0);
      REQUIRE_THAT(r.out, Catch::Contains("step_00000006"));

      // eval: beyond the training length where the task has lengths (text, synthetic tasks);
      // tasks with a fixed geometry (patch grid, graphs) at their own length.
      const bool fixed_geometry = cfg.data.task == "patch_grid" || cfg.data.task == "graph";
      const int64_t L = fixed_geometry ? cfg.data.seq_len : 2 * cfg.data.seq_len;
      r = cli("eval " + dir + " --seq-len " + std::to_string(L) + " --json");
      INFO("eval --seq-len " << L << ": " << r.out);
      REQUIRE(r.code == 0);
      REQUIRE_THAT(r.out, Catch::Contains("\"loss\""));

      r = cli("inspect " + dir);
      INFO("inspect: " << r.out);
      REQUIRE(r.code == 0);
      REQUIRE(fs::exists(dir + "/inspect/inspect.json"));
      REQUIRE(fs::file_size(dir + "/inspect/attention_layer0.dot") > 100);

      r = cli("report " + dir);
      INFO("report: " << r.out);
      REQUIRE(r.code == 0);
      REQUIRE(fs::exists(dir + "/report/report.md"));

      r = cli("sample " + dir + " --tokens 5 --seed 1");
      INFO("sample: " << r.out);
      // A decoder whose encoding reads data channels (ast) has none for the tokens it generates.
      if (relpos::train::text_decoder(cfg) && variant.facts.position_channels.empty()) {
        REQUIRE(r.code == 0);
      } else {
        REQUIRE(r.code == 2);  // refused with a usage/config error, not a crash
      }

      r = cli("gradcheck --type " + name);
      INFO("gradcheck: " << r.out);
      REQUIRE(r.code == 0);
      fs::remove_all(dir);
      ++n;
    }
  }
  CHECK(n >= 1);
}

TEST_CASE("cli: every config in configs/ validates and trains 3 steps", "[cli][configs]") {
  int n = 0;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(RELPOS_SOURCE_DIR "/configs"))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    const std::string dir = (fs::temp_directory_path() / ("config_" + f.stem().string())).string();
    fs::remove_all(dir);
    Result v = cli("validate " + f.string());
    INFO(f.string() << "\nvalidate: " << v.out);
    REQUIRE(v.code == 0);
    Result r = cli("train " + f.string() +
                   " --set train.steps=3 --set train.eval_every=3 --set train.eval_batches=1 --set optim.warmup=1"
                   " --set train.log_every=1 --set train.checkpoint_every=3 --set output.dir=" +
                   dir);
    INFO("train: " << r.out);
    REQUIRE(r.code == 0);
    REQUIRE(fs::exists(dir + "/metrics.jsonl"));
    fs::remove_all(dir);
    ++n;
  }
  CHECK(n >= 20);
}

// model.position.distance: time on every distance-indexed encoding (PositionFacts): a small
// decoder on the Bach-chorale token files (data/chorales_*, the `time` channel), every verb
// that reads a run, and sample refusing with a clear error (generated tokens carry no time).
TEST_CASE("cli: every verb on every distance-indexed encoding with time distance", "[cli][every_verb][channel]") {
  int n = 0;
  for (const auto& variant : nn::position_variants()) {
    if (!variant.facts.distance_indexed) continue;
    const std::string& name = variant.name;
    DYNAMIC_SECTION(name) {
      const fs::path tmp = fs::temp_directory_path() / ("every_verb_time_" + name);
      fs::remove_all(tmp);
      fs::create_directories(tmp);
      const std::string dir = (tmp / "run").string(), config = (tmp / "config.yaml").string();
      {
        std::ofstream f(config);
        f << "model: {kind: decoder, d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32, max_len: 256,\n"
          << "        position: {type: " << name << ", distance: time}}\n"
          << "data: {task: tokens, path: " RELPOS_SOURCE_DIR "/data/chorales_train.rptok,\n"
          << "       val_path: " RELPOS_SOURCE_DIR "/data/chorales_val.rptok, position_channels: [time],\n"
          << "       seq_len: 32, batch_size: 4}\n"
          << "optim: {name: adamw, lr: 1.0e-3, warmup: 1}\n"
          << "train: {steps: 4, eval_every: 2, eval_batches: 1, log_every: 1, checkpoint_every: 2}\n"
          << "output: {dir: " << dir << "}\n";
      }
      Result r = cli("train " + config);
      INFO("train: " << r.out);
      REQUIRE(r.code == 0);
      REQUIRE_THAT(r.out, Catch::Contains("sample: none (model.position.distance 'time'"));
      r = cli("train " + config + " --set train.steps=6 --resume " + dir);
      INFO("resume: " << r.out);
      REQUIRE(r.code == 0);
      REQUIRE_THAT(r.out, Catch::Contains("step_00000006"));
      r = cli("eval " + dir + " --seq-len 64 --json");
      INFO("eval --seq-len 64: " << r.out);
      REQUIRE(r.code == 0);
      REQUIRE_THAT(r.out, Catch::Contains("\"beyond_loss\""));
      r = cli("eval " + dir + " --seq-len 64 --mode windows");  // the token stream has no channels
      INFO("eval --mode windows: " << r.out);
      REQUIRE(r.code == 2);
      REQUIRE_THAT(r.out, Catch::Contains("use --mode random"));
      r = cli("inspect " + dir);
      INFO("inspect: " << r.out);
      REQUIRE(r.code == 0);
      REQUIRE_THAT(r.out, Catch::Contains("distances kj - qi: from channel 'time'"));
      REQUIRE_THAT(r.out, Catch::Contains("of a validation window"));
      REQUIRE(fs::exists(dir + "/inspect/inspect.json"));
      r = cli("report " + dir);
      INFO("report: " << r.out);
      REQUIRE(r.code == 0);
      REQUIRE(fs::exists(dir + "/report/report.md"));
      r = cli("sample " + dir + " --tokens 5 --seed 1");
      INFO("sample: " << r.out);
      REQUIRE(r.code == 2);
      REQUIRE_THAT(r.out, Catch::Contains("takes its distances from the data channel 'time'"));
      r = cli("gradcheck --type " + name);
      INFO("gradcheck: " << r.out);
      REQUIRE(r.code == 0);
      REQUIRE_THAT(r.out, Catch::Contains("time distance"));
      r = cli("bias --type " + name + " --heads 2 --causal --times 0,2,2,5 --json");  // bias against time distance
      INFO("bias --times: " << r.out);
      REQUIRE(r.code == 0);
      REQUIRE_THAT(r.out, Catch::Contains("\"lq\":4"));
      fs::remove_all(tmp);
      ++n;
    }
  }
  CHECK(n >= 1);
}
