// Hostile runs: existing run directories, resumes into other runs, damaged
// trainer_state.json, NaN/Inf and wrong-dtype tensors in checkpoints, sparse files declaring
// huge tensors, NaN during training, kill -9 during training. Nothing may be lost silently;
// a "good" checkpoint is finite; errors name the file and the tensor or key.
#include <catch2/catch.hpp>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "../trainers/hostile_helpers.h"
#include "autograd/autocast.h"
#include "kernels/ops.h"
#include "trainers/io/checkpoint.h"
#include "trainers/trainer.h"

using namespace relpos;
using namespace relpos::hostile;
using Catch::Contains;

namespace {

train::Config tiny(const std::string& dir, int steps = 6, const std::string& extra = "") {
  return train::parse_config(tiny_yaml(dir, steps, extra), "tiny.yaml");
}

// Rewrites one tensor of a checkpoint's model.safetensors through `edit`.
void edit_model(const std::string& ck, const std::function<void(NamedTensors&)>& edit) {
  const std::string path = ck + "/model.safetensors";
  NamedTensors t = read_safetensors(path);
  edit(t);
  write_safetensors(path, t);
}

nlohmann::json state_of(const std::string& ck) {
  return nlohmann::json::parse(slurp(ck + "/trainer_state.json"));
}

}  // namespace

TEST_CASE("hostile runs: a new run refuses a non-empty output.dir unless --overwrite", "[hostile][rundir]") {
  const std::string d = tmp("rundir_a");
  train::train(tiny(d));
  const std::string metrics = slurp(d + "/metrics.jsonl");
  REQUIRE(!metrics.empty());
  // Another model into the same directory: refused, nothing touched.
  auto other = train::parse_config(tiny_yaml(d) + "", "other.yaml", {"model.d_model=32"});
  REQUIRE_THROWS_AS(train::train(other), ConfigError);
  REQUIRE_THROWS_WITH(train::train(other), Contains("already holds files") && Contains("--overwrite"));
  REQUIRE(slurp(d + "/metrics.jsonl") == metrics);
  // --overwrite replaces the old run: no checkpoint of the old model survives.
  train::TrainOptions ow;
  ow.overwrite = true;
  train::train(tiny(d, 3), ow);
  auto cks = list_checkpoints(d);
  REQUIRE(cks.size() == 1);
  REQUIRE(cks[0].first == 3);
  // A plain file at output.dir is an error too.
  const std::string f = tmp("rundir_file");
  write(f, "x");
  REQUIRE_THROWS_WITH(train::train(tiny(f)), Contains("not a directory"));
  // The CLI: exit 2 and the message.
  Run r = cli("train " RELPOS_SOURCE_DIR "/configs/quickstart.yaml --set output.dir=" + d + " --set train.steps=100");
  INFO(r.out);
  REQUIRE(r.code == 2);
  REQUIRE_THAT(r.out, Contains("already holds files"));
}

TEST_CASE("hostile runs: --resume writes into the run it resumes, not into output.dir", "[hostile][rundir]") {
  const std::string a = tmp("resume_a"), c = tmp("resume_c");
  train::train(tiny(a, 6));
  fs::create_directories(c);
  write(c + "/metrics.jsonl", "{\"step\":1,\"loss\":1.0}\n");  // someone else's run
  train::TrainOptions opt;
  opt.resume = checkpoint_dir(a, 3);
  auto cfg = tiny(c, 9);
  auto r = train::train(cfg, opt);
  REQUIRE(r.run_dir == fs::path(a).lexically_normal().string());
  REQUIRE(slurp(c + "/metrics.jsonl") == "{\"step\":1,\"loss\":1.0}\n");  // untouched
  REQUIRE(list_checkpoints(a).back().first == 9);
}

TEST_CASE("hostile runs: a damaged trainer_state.json fails before anything is truncated", "[hostile][resume]") {
  const std::string a = tmp("damaged_state");
  train::train(tiny(a, 6));
  const std::string ck = checkpoint_dir(a, 3), metrics = slurp(a + "/metrics.jsonl");
  const std::string good = slurp(ck + "/trainer_state.json");
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string expect;
  };
  std::vector<Case> cases = {
      {[](nlohmann::json& j) { j["step"] = -5; }, "'step' must be a non-negative integer"},
      {[](nlohmann::json& j) { j.erase("config_yaml"); }, "key 'config_yaml' is missing"},
      {[](nlohmann::json& j) { j["data_rng"] = "x"; }, "'data_rng'"},
      {[](nlohmann::json& j) { j["vocab"] = {1, 2}; }, "'vocab'"},
      {[](nlohmann::json& j) { j["config_yaml"] = "model:\n  d_model: -4\n"; }, "holds an invalid config"},
      {[](nlohmann::json& j) { j = nlohmann::json::array(); }, "not a JSON object"},
  };
  for (auto& c : cases) {
    nlohmann::json j = nlohmann::json::parse(good);
    c.edit(j);
    write(ck + "/trainer_state.json", j.dump());
    train::TrainOptions opt;
    opt.resume = ck;
    INFO(c.expect);
    REQUIRE_THROWS_WITH(train::train(tiny(a, 9), opt), Contains(c.expect) && Contains("trainer_state.json"));
    REQUIRE(slurp(a + "/metrics.jsonl") == metrics);  // history intact
    // eval / the CLI: exit 1 with the named error, never a raw json exception
    Run r = cli("eval " + ck);
    REQUIRE(r.code == 1);
    REQUIRE_THAT(r.out, !Contains("json.exception") && !Contains("internal error"));
  }
  write(ck + "/trainer_state.json", "{\"step\": 3,");  // cut short
  Run r = cli("eval " + ck);
  REQUIRE(r.code == 1);
  REQUIRE_THAT(r.out, Contains("trainer_state.json") && Contains("not valid JSON"));
}

TEST_CASE("hostile runs: non-finite or wrongly typed checkpoint tensors are rejected by name", "[hostile][checkpoint]") {
  const std::string a = tmp("bad_tensors");
  train::train(tiny(a, 3));
  const std::string ck = checkpoint_dir(a, 3);
  const std::string orig = slurp(ck + "/model.safetensors");
  std::string victim;
  edit_model(ck, [&](NamedTensors& t) {
    victim = t[1].first;
    Tensor x = t[1].second.clone();
    x.view({-1}).narrow(0, 0, 1).fill_(std::numeric_limits<double>::quiet_NaN());
    t[1].second = x;
  });
  REQUIRE_THROWS_WITH(train::load_run(a), Contains("model.safetensors") && Contains(victim) && Contains("non-finite"));
  Run r = cli("eval " + a);
  INFO(r.out);
  REQUIRE(r.code == 1);
  REQUIRE_THAT(r.out, Contains(victim) && !Contains("loss nan"));

  write(ck + "/model.safetensors", orig);
  edit_model(ck, [&](NamedTensors& t) { t[1].second = t[1].second.to(DType::I64); });
  REQUIRE_THROWS_WITH(train::load_run(a), Contains(victim) && Contains("I64") && Contains("F32"));

  write(ck + "/model.safetensors", orig);
  edit_model(ck, [&](NamedTensors& t) { t[1].second = Tensor::zeros({1, 1}, DType::F32); });
  REQUIRE_THROWS_WITH(train::load_run(a), Contains(victim) && Contains("shape"));

  write(ck + "/model.safetensors", orig);
  edit_model(ck, [&](NamedTensors& t) { t.pop_back(); });
  REQUIRE_THROWS_WITH(train::load_run(a), Contains("missing"));
}

TEST_CASE("hostile runs: a sparse safetensors file declaring a 4 GiB tensor is rejected from its header",
          "[hostile][checkpoint]") {
  const std::string a = tmp("sparse");
  train::train(tiny(a, 3));
  const std::string ck = checkpoint_dir(a, 3);
  // Header: the first model tensor declared as 2^30 floats; the file is extended (sparse) to
  // match, so only the comparison with the model's shape can reject it.
  NamedTensors t = read_safetensors(ck + "/model.safetensors");
  const std::string name = t[0].first;
  std::string header = "{\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[1073741824],\"data_offsets\":[0,4294967296]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  write(ck + "/model.safetensors", bytes + header);
  fs::resize_file(ck + "/model.safetensors", 8 + header.size() + (uint64_t(1) << 32));
  REQUIRE_THROWS_WITH(train::load_run(a), Contains(name) && Contains("[1073741824]") && Contains("expects"));
  // the optimizer file: a declared size far over what the model can need
  SafetensorsExpect e;
  e.max_data_bytes = 1024;
  REQUIRE_THROWS_WITH(read_safetensors(ck + "/model.safetensors", nullptr, e), Contains("more than the 1024 expected"));
}

TEST_CASE("hostile runs: only finite state is written", "[hostile][checkpoint]") {
  const std::string d = tmp("finite_write");
  NamedTensors t = {{"w", Tensor::from_vector<float>({1.f, std::numeric_limits<float>::infinity()}, {2})}};
  REQUIRE_THROWS_WITH(save_checkpoint(d, 1, Checkpoint{t, {}, nlohmann::json::object()}, 0),
                      Contains("'w'") && Contains("non-finite") && Contains("element 1"));
  REQUIRE(list_checkpoints(d).empty());
}

TEST_CASE("hostile runs: the abort checkpoint equals a regular checkpoint at that step", "[hostile][nan]") {
  const std::string ref = tmp("abort_ref"), bad = tmp("abort_bad");
  auto cref = tiny(ref, 8);
  cref.model.dropout = 0.1;  // so the dropout RNG moves
  cref.train.checkpoint_every = 1;
  train::train(cref);
  auto cbad = tiny(bad, 8);
  cbad.model.dropout = 0.1;
  cbad.train.checkpoint_every = 3;  // step 4 is saved only by the abort path
  train::TrainOptions opt;
  opt.after_backward = [](int64_t step, nn::Model& m) {
    if (step != 5) return;
    auto p = m.parameters().front();
    p.set_grad(Tensor::full(p.shape(), std::numeric_limits<double>::quiet_NaN(), p.dtype()));
  };
  REQUIRE_THROWS_WITH(train::train(cbad, opt), Contains("step 5") && Contains("step_00000004"));
  const std::string a = checkpoint_dir(ref, 4), b = checkpoint_dir(bad, 4);
  auto sa = state_of(a), sb = state_of(b);
  REQUIRE(sa["data_rng"] == sb["data_rng"]);
  REQUIRE(sa["dropout_rng"] == sb["dropout_rng"]);
  REQUIRE(sa["step"] == sb["step"]);
  REQUIRE(slurp(a + "/model.safetensors") == slurp(b + "/model.safetensors"));
  REQUIRE(slurp(a + "/optimizer.safetensors") == slurp(b + "/optimizer.safetensors"));
}

TEST_CASE("hostile runs: abort with non-finite weights keeps the previous good checkpoint and says which",
          "[hostile][nan]") {
  const std::string d = tmp("abort_nan_weights");
  auto cfg = tiny(d, 8);  // checkpoints at 3, 6
  train::TrainOptions opt;
  opt.after_backward = [](int64_t step, nn::Model& m) {
    if (step != 5) return;
    auto p = m.parameters().front();
    p.data().fill_(std::numeric_limits<double>::quiet_NaN());  // the weights themselves
    p.set_grad(Tensor::full(p.shape(), std::numeric_limits<double>::quiet_NaN(), p.dtype()));
  };
  REQUIRE_THROWS_WITH(train::train(cfg, opt), Contains("step_00000003") && Contains("not saved") &&
                                                  Contains("non-finite"));
  REQUIRE(list_checkpoints(d).back().first == 3);
  REQUIRE_NOTHROW(train::load_run(d));  // the kept state is finite and loads
}

TEST_CASE("hostile runs: nan_policy skip keeps a final checkpoint even when the last step is skipped",
          "[hostile][nan]") {
  const std::string d = tmp("skip_final");
  auto cfg = tiny(d, 6, "  nan_policy: skip\n");
  cfg.train.checkpoint_every = 0;
  train::TrainOptions opt;
  opt.after_backward = [](int64_t step, nn::Model& m) {
    if (step != 6) return;
    auto p = m.parameters().front();
    p.set_grad(Tensor::full(p.shape(), std::numeric_limits<double>::infinity(), p.dtype()));
  };
  auto r = train::train(cfg, opt);
  REQUIRE(r.skipped_steps == 1);
  auto cks = list_checkpoints(d);
  REQUIRE(cks.size() == 1);
  REQUIRE(cks[0].first == 6);
  REQUIRE(state_of(cks[0].second)["skipped_steps"] == 1);
}

TEST_CASE("hostile runs: kill -9 during training leaves a resumable run", "[hostile][kill]") {
  const std::string d = tmp("kill9");
  fs::create_directories(d + "_cfg");
  const std::string cfgf = d + "_cfg/c.yaml";
  std::string y = tiny_yaml(d, 100000);
  y.replace(y.find("checkpoint_every: 3"), 19, "checkpoint_every: 1");
  y.replace(y.find("keep_last: 0"), 12, "keep_last: 2");
  write(cfgf, y);
  // Kill at a different moment each round (0.4 s, 0.7 s, 1.0 s, ... after start); at least
  // three rounds, and more (up to 10) while none has reached a checkpoint yet: on a loaded
  // machine start-up alone can take a second.
  for (int round = 0; round < 3 || (round < 10 && list_checkpoints(d).empty()); ++round) {
    const bool resume = !list_checkpoints(d).empty();
    std::string cmd = std::string(RELPOS_CLI_PATH) + " train " + cfgf + (resume ? " --resume " + d : " --overwrite") +
                      " > /dev/null 2>&1 & pid=$!; sleep " + std::to_string(0.4 + 0.3 * round) +
                      "; kill -9 $pid; wait $pid 2>/dev/null; true";
    REQUIRE(std::system(cmd.c_str()) == 0);
    auto cks = list_checkpoints(d);
    if (cks.empty()) continue;  // killed before the first checkpoint: nothing to resume yet
    for (auto& [s, p] : cks) REQUIRE_NOTHROW(load_checkpoint(p));  // every listed checkpoint is complete
  }
  REQUIRE(!list_checkpoints(d).empty());
  auto cfg = train::parse_config(y, cfgf, {"train.steps=" + std::to_string(list_checkpoints(d).back().first + 2)});
  train::TrainOptions opt;
  opt.resume = d;
  auto r = train::train(cfg, opt);
  REQUIRE(r.losses.size() == 2);
}

TEST_CASE("hostile runs: an fp16 overflow until nan_policy abort names a checkpoint that evaluates finite",
          "[hostile][nan]") {
  // After step 3 the weights are multiplied by 1e4: finite, but every later float16 forward
  // overflows. Steps 4 and 5 are fp16 overflow steps (no update, the loss scale 2 -> 1 -> 0.5),
  // step 6 still overflows below scale 1 and aborts. The checkpoints of steps 3, 4 and 5 hold
  // the same overflowing weights: the last good state is step 2's.
  const std::string d = tmp("fp16_abort");
  auto cfg = tiny(d, 10, "  precision: fp16\n  loss_scale_init: 2\n");
  cfg.train.checkpoint_every = 1;
  train::TrainOptions opt;
  opt.after_backward = [](int64_t step, nn::Model& m) {
    if (step != 3) return;
    for (auto& p : m.parameters()) p.data().copy_(k::mul(p.data(), Tensor::scalar(1e4, p.data().dtype(), p.data().device())));
  };
  std::string msg;
  try {
    train::train(cfg, opt);
  } catch (const Error& e) {
    msg = e.what();
  }
  INFO(msg);
  REQUIRE_THAT(msg, Contains("non-finite loss") && Contains("nan_policy: abort"));
  REQUIRE_THAT(msg, Contains("the last good state"));
  const size_t at = msg.find("the last good state");
  const size_t p = msg.find(d, at);
  REQUIRE(p != std::string::npos);
  const std::string named = msg.substr(p, msg.find_first_of(" ;", p) - p);
  // The named checkpoint's model evaluates to a finite loss at the run's precision.
  train::LoadedRun run = train::load_run(named);
  AutocastGuard autocast(run.cfg.train.precision);
  const train::EvalResult ev = train::evaluate(*run.model, *run.data, run.cfg);
  INFO(named << ": eval loss " << ev.loss);
  CHECK(std::isfinite(ev.loss));
  CHECK(run.step < 3);
}

TEST_CASE("hostile runs: a checkpoint whose config claims a huge vocabulary is refused before its model is built",
          "[hostile][checkpoint][memory]") {
  const std::string d = tmp("huge_vocab");
  train::train(tiny(d, 3));
  const std::string ck = checkpoint_dir(d, 3);
  nlohmann::json st = state_of(ck);
  std::string yaml = st["config_yaml"].get<std::string>();
  const size_t at = yaml.find("vocab_size: 6");
  REQUIRE(at != std::string::npos);
  yaml.replace(at, 13, "vocab_size: 16000000");
  st["config_yaml"] = yaml;
  write(ck + "/trainer_state.json", st.dump());
  // 16M x d_model 16 x 4 bytes would be 1 GiB per table: refused from the file's size first,
  // also under an address-space limit far below that.
  REQUIRE_THROWS_WITH(train::load_run(d), Contains(ck) && Contains("parameters") && Contains("model.safetensors"));
  if (kAddressSanitizer) return;  // no address-space limit under AddressSanitizer
  Run r = test::shell_run("ulimit -v 1000000; timeout -s KILL 60 " + test::shell_quote(RELPOS_CLI_PATH) + " eval " + d);
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Contains("parameters") && !Contains("out of memory"));
}
