// The sweep runner (experiments/sweep.h): the point list of grid x recipes, one run directory and
// one sweep.jsonl line per point, finished points skipped on a re-run, an interrupted point
// resumed from its checkpoint, evaluation lengths recorded per point.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "experiments/sweep.h"
#include "sweep_helpers.h"

using namespace relpos;
namespace fs = std::filesystem;

namespace {

std::string write_spec(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("relpos_test_sweep_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "spec.yaml") << "dir: " << (dir / "out").string() << "\n" << test::kTinySweepSpec;
  return (dir / "spec.yaml").string();
}

std::vector<nlohmann::json> lines(const std::string& path) { return test::json_lines(path); }

}  // namespace

TEST_CASE("sweep: grid x recipes gives one run per point, a re-run skips finished points", "[sweep]") {
  train::SweepSpec spec = train::load_sweep_spec(write_spec("skip"));
  REQUIRE(spec.points.size() == 4);
  CHECK(spec.points[0].name == "type=alibi base");
  CHECK(spec.points[1].name == "type=alibi zl");
  CHECK(spec.points[3].dir_name == "003_t5_zl");
  train::SweepResult r = train::run_sweep(spec);
  CHECK(r.ran == 4);
  CHECK(r.skipped == 0);
  auto idx = lines(spec.dir + "/sweep.jsonl");
  REQUIRE(idx.size() == 4);
  for (auto& j : idx) {
    CHECK(j["status"] == "done");
    CHECK(fs::exists(j["run_dir"].get<std::string>() + "/metrics.jsonl"));
    REQUIRE(j["eval"].size() == 2);
    CHECK(j["eval"][1]["seq_len"] == 10);
    CHECK(j["eval"][1]["beyond_tokens"].get<int64_t>() > 0);
    CHECK(j["final_train_loss"].is_number());
  }
  CHECK(idx[1]["grid"]["model.position.type"] == "alibi");
  CHECK(idx[1]["recipe"] == "zl");
  CHECK_THAT(r.summary, Catch::Contains("type=t5 zl"));
  train::SweepResult again = train::run_sweep(spec);
  CHECK(again.ran == 0);
  CHECK(again.skipped == 4);
  CHECK(lines(spec.dir + "/sweep.jsonl").size() == 4);  // nothing appended
}

TEST_CASE("sweep: an interrupted point resumes from its checkpoint", "[sweep][resume]") {
  train::SweepSpec spec = train::load_sweep_spec(write_spec("resume"));
  train::SweepOptions o;
  o.train_hook = [](const train::SweepPoint& p, int64_t step) {
    if (p.index == 1 && step == 5) throw std::runtime_error("interrupted");
  };
  CHECK_THROWS_WITH(train::run_sweep(spec, o), "interrupted");
  auto idx = lines(spec.dir + "/sweep.jsonl");
  REQUIRE(idx.size() == 1);  // point 0 finished, point 1 was cut at step 5 (checkpoint at 3)
  CHECK(fs::exists(spec.dir + "/" + spec.points[1].dir_name + "/checkpoints/step_00000003"));
  train::SweepResult r = train::run_sweep(spec);
  CHECK(r.skipped == 1);
  CHECK(r.ran == 3);
  idx = lines(spec.dir + "/sweep.jsonl");
  REQUIRE(idx.size() == 4);
  CHECK(idx[1]["index"] == 1);
  CHECK(idx[1]["resumed_from"] == 3);
  CHECK(idx[1]["steps"] == 6);
  CHECK_FALSE(idx[2].contains("resumed_from"));
}

TEST_CASE("sweep: spec errors name the file and key", "[sweep]") {
  fs::path p = fs::temp_directory_path() / "relpos_test_sweep_bad.yaml";
  std::ofstream(p) << "config: {model: {d_model: 16}}\ngrdi: {optim.lr: [1]}\n";
  CHECK_THROWS_WITH(train::load_sweep_spec(p.string()), Catch::Contains("unknown sweep key 'grdi'"));
  std::ofstream(p) << "config: {model: {d_model: 16}}\ngrid: {optim.lrr: [1]}\n";
  CHECK_THROWS_WITH(train::load_sweep_spec(p.string()), Catch::Contains("lrr"));
}

TEST_CASE("sweep: the whole spec is validated before anything runs", "[sweep]") {
  fs::path dir = fs::temp_directory_path() / "sweep_validate";
  fs::create_directories(dir);
  const fs::path p = dir / "spec.yaml";
  auto refused = [&](const std::string& spec, const std::string& what, int64_t max_points = 10000) {
    std::ofstream(p) << "config: {model: {d_model: 16, n_heads: 2}, train: {steps: 4}}\n" << spec;
    INFO(spec);
    CHECK_THROWS_WITH(train::load_sweep_spec(p.string(), max_points), Catch::Contains(p.string()) && Catch::Contains(what));
  };
  // eval: typos, scalars where lists belong, non-positive values
  refused("eval: {lenghts: [8]}\n", "unknown sweep key 'eval.lenghts'");
  refused("eval: {lengths: 16}\n", "expected a list of lengths");
  refused("eval: {lengths: [0]}\n", "eval.lengths: 0 is out of range");
  refused("eval: {lengths: [-5]}\n", "eval.lengths: -5 is out of range");
  refused("eval: {lengths: [8], stride: -1}\n", "eval.stride");
  refused("eval: {lengths: [8], max_tokens: 0}\n", "eval.max_tokens");
  refused("eval: {lengths: [8], bucket: x}\n", "eval.bucket: expected an integer, got 'x'");
  // eval.val_paths: one validation file per length; `examples` only for labelled examples
  refused("eval: {lengths: [8, 16], val_paths: [a.rptok]}\n",
          "eval.val_paths: lists 1 files for 2 eval.lengths; give one validation file per length");
  refused("eval: {lengths: [8], val_paths: a.rptok}\n", "eval.val_paths: expected a list of token files");
  refused("eval: {lengths: [8], mode: examples}\n",
          "eval.mode examples (every validation example once) needs data.task token_labels, not 'text'");
  refused("eval: {lengths: [8], mode: exemples}\n", "'exemples': expected random, windows, sliding or examples");
  refused("checkpoint_every: -3\n", "checkpoint_every");
  // points: a misspelt key, duplicate names, wrong types
  refused("points:\n  - {name: a, sets: {optim.lr: 0.1}}\n", "unknown sweep key 'points[].sets'");
  refused("points:\n  - {name: a, set: {optim.lr: 0.1}}\n  - {name: a, set: {optim.lr: 0.2}}\n", "'a' is used twice");
  refused("grid: {optim.lr: [0.1, 0.1]}\n", "both named 'lr=0.1'");
  refused("points: {name: a}\n", "expected a list");
  // points[].only: a grid key and that key's grid values only
  refused("grid: {optim.lr: [0.1, 0.2]}\npoints:\n  - {name: a, only: {optim.eps: [1]}}\n",
          "points[a].only: 'optim.eps' is not a grid key (the grid has: optim.lr)");
  refused("grid: {optim.lr: [0.1, 0.2]}\npoints:\n  - {name: a, only: {optim.lr: [0.3]}}\n",
          "'0.3' is not one of the grid's values (0.1, 0.2)");
  refused("grid: {optim.lr: [0.1, 0.2]}\npoints:\n  - {name: a, only: [optim.lr]}\n", "expected a mapping");
  refused("grid: {optim.lr: [0.1, 0.2, 0.3]}\npoints:\n  - {name: a}\n  - {name: b, only: {optim.lr: 0.1}}\n",
          "the sweep has 4 points", 3);
  refused("grid: [1, 2]\n", "grid: expected a mapping");
  // a grid above the limit is refused with the count, before any point is expanded
  std::string big = "grid:\n";
  for (const char* k : {"optim.lr", "optim.eps", "optim.weight_decay", "train.seed", "model.dropout", "optim.warmup"})
    big += std::string("  ") + k + ": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n";  // 10^6 points
  auto t0 = std::chrono::steady_clock::now();
  refused(big, "more than the limit of 10000");
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  refused("grid: {optim.lr: [0.1, 0.2, 0.3]}\n", "the sweep has 3 points", 2);
  // a YAML alias bomb stops at the node limit
  std::string bomb = "grid:\n  a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (int i = 1; i < 9; ++i) {
    const std::string id = std::to_string(i), prev = std::to_string(i - 1);
    bomb += "  a";
    bomb += id;
    bomb += ": &a";
    bomb += id;
    bomb += " [*a";
    bomb += prev;
    for (int k = 1; k < 10; ++k) bomb += ", *a", bomb += prev;
    bomb += "]\n";
  }
  t0 = std::chrono::steady_clock::now();
  refused(bomb, "alias bomb");
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  // config: must be a mapping (was "--set '=3': expected key=value"); base: must be a file
  std::ofstream(p) << "config: 3\n";
  CHECK_THROWS_WITH(train::load_sweep_spec(p.string()), Catch::Contains("config: expected a mapping"));
  std::ofstream(p) << "base: .\n";
  CHECK_THROWS_WITH(train::load_sweep_spec(p.string()), Catch::Contains("is a directory"));
  std::ofstream(p) << "config: {train: {steps: 4}}\n---\nconfig: {train: {steps: 5}}\n";
  CHECK_THROWS_WITH(train::load_sweep_spec(p.string()), Catch::Contains("second YAML document"));
  // an eval length the model cannot serve is refused before anything trains
  refused("grid: {model.position.type: [learned]}\neval: {lengths: [8, 1000], mode: random}\n",
          "eval.lengths 1000 needs 1000 positions, more than model.max_len (512)");
  // ... and one the data cannot serve: 200 characters, a 10% validation split of 20 (was: found after training)
  const fs::path text = dir / "small.txt";
  {
    std::ofstream t(text);
    for (int i = 0; i < 20; ++i) t << "abcdefghi\n";
  }
  const std::string text_cfg = "config: {model: {d_model: 16, n_heads: 2}, train: {steps: 4}, data: {task: text, path: '" +
                               text.string() + "', seq_len: 8, val_fraction: 0.1}}\n";
  std::ofstream(p) << text_cfg << "eval: {lengths: [8, 32], mode: random}\n";
  CHECK_THROWS_WITH(train::load_sweep_spec(p.string()),
                    Catch::Contains(p.string()) && Catch::Contains("eval.lengths 32 needs 34 validation characters") &&
                        Catch::Contains("has 20"));
  std::ofstream(p) << text_cfg << "eval: {lengths: [8, 18], mode: random}\n";
  CHECK(train::load_sweep_spec(p.string()).points.size() == 1);
  // ... and a valid spec still loads
  std::ofstream(p) << "config: {model: {d_model: 16, n_heads: 2}, train: {steps: 4}}\ngrid: {optim.lr: [0.1, 0.2]}\n"
                      "eval: {lengths: [8, 16], mode: random}\n";
  CHECK(train::load_sweep_spec(p.string()).points.size() == 2);
}

TEST_CASE("sweep: a point stopped before its first checkpoint starts again on the next run", "[sweep][resume]") {
  train::SweepSpec spec = train::load_sweep_spec(write_spec("no_checkpoint"));
  train::SweepOptions o;
  o.train_hook = [](const train::SweepPoint& p, int64_t step) {  // Ctrl-C at step 2, before checkpoint 3
    if (p.index == 0 && step == 2) throw std::runtime_error("interrupted");
  };
  CHECK_THROWS_WITH(train::run_sweep(spec, o), "interrupted");
  const std::string point0 = spec.dir + "/" + spec.points[0].dir_name;
  REQUIRE(fs::exists(point0 + "/config.yaml"));  // the attempt left its files, no checkpoint
  REQUIRE_FALSE(fs::exists(point0 + "/checkpoints/step_00000003"));
  train::SweepResult r = train::run_sweep(spec);
  CHECK(r.ran == 4);
  for (auto& j : lines(spec.dir + "/sweep.jsonl")) {
    INFO(j.dump());
    CHECK(j["status"] == "done");  // was "failed" forever: "output.dir ... already holds files"
  }
}

TEST_CASE("sweep: seeds N runs every point with train.seed 1 to N (innermost key) and refuses a train.seed grid",
          "[sweep]") {
  fs::path p = fs::temp_directory_path() / "relpos_test_sweep_seeds.yaml";
  std::ofstream(p) << "config: {model: {d_model: 16, n_heads: 2}, train: {steps: 4}}\n"
                      "grid: {model.position.type: [alibi, t5]}\nseeds: 3\n";
  auto s = train::load_sweep_spec(p.string());
  REQUIRE(s.points.size() == 6);
  REQUIRE(s.grid_keys == std::vector<std::string>{"model.position.type", "train.seed"});
  const char* want[6][2] = {{"alibi", "1"}, {"alibi", "2"}, {"alibi", "3"}, {"t5", "1"}, {"t5", "2"}, {"t5", "3"}};
  for (size_t i = 0; i < 6; ++i) {
    INFO(s.points[i].name);
    CHECK(s.points[i].grid[0].second == want[i][0]);
    CHECK(s.points[i].grid[1] == std::make_pair(std::string("train.seed"), std::string(want[i][1])));
    CHECK(s.points[i].overrides.back() == std::string("train.seed=") + want[i][1]);
    CHECK(s.points[i].name == std::string("type=") + want[i][0] + " seed=" + want[i][1]);
  }
  std::ofstream(p) << "config: {model: {d_model: 16, n_heads: 2}}\ngrid: {train.seed: [4, 5]}\nseeds: 2\n";
  CHECK_THROWS_WITH(train::load_sweep_spec(p.string()), Catch::Contains(p.string() + ":3: seeds") &&
                                                            Catch::Contains("either seeds: N or a train.seed grid"));
  for (const char* bad : {"seeds: 0\n", "seeds: two\n", "seeds: 1001\n", "seeds: [1, 2]\n"}) {
    std::ofstream(p) << "config: {model: {d_model: 16, n_heads: 2}}\n" << bad;
    INFO(bad);
    CHECK_THROWS_WITH(train::load_sweep_spec(p.string()), Catch::Contains(p.string() + ":2: seeds"));
  }
}

TEST_CASE("sweep: eval.val_paths files are opened before anything runs, naming the point and file", "[sweep]") {
  fs::path dir = fs::temp_directory_path() / "sweep_val_paths";
  fs::create_directories(dir);
  const fs::path p = dir / "spec.yaml";
  std::ofstream(p) << "config: {model: {kind: encoder, d_model: 16, n_heads: 2, max_len: 256}, data: {task: token_labels, "
                      "path: " RELPOS_SOURCE_DIR "/data/digits_train.rptok, val_path: " RELPOS_SOURCE_DIR
                      "/data/digits_val.rptok, position_channels: [row, col], seq_len: 64}, train: {steps: 4}}\n"
                      "points: [{name: cpe, set: {model.position.type: cpe}}]\n"
                      "eval: {lengths: [64, 144], mode: examples, val_paths: [" RELPOS_SOURCE_DIR
                      "/data/digits_val.rptok, " << dir.string() << "/missing.rptok]}\n";
  CHECK_THROWS_WITH(train::load_sweep_spec(p.string()),
                    Catch::Contains("point 'cpe': eval.val_paths '" + dir.string() + "/missing.rptok'"));
  fs::remove_all(dir);
}

TEST_CASE("sweep: every spec in configs/experiments loads and validates whole", "[sweep][config]") {
  int n = 0;
  for (const auto& e : fs::directory_iterator(RELPOS_SOURCE_DIR "/configs/experiments")) {
    if (e.path().extension() != ".yaml") continue;
    INFO(e.path().string());
    train::SweepSpec s;
    REQUIRE_NOTHROW(s = train::load_sweep_spec(e.path().string()));
    CHECK(!s.points.empty());
    ++n;
  }
  CHECK(n >= 3);
  // the long protocol is what the README measured: 16 encodings x 3 seeds, both modes, 1x..16x
  auto s = train::load_sweep_spec(RELPOS_SOURCE_DIR "/configs/experiments/extrapolation_long.yaml");
  CHECK(s.points.size() == 48);
  CHECK(s.eval_modes == std::vector<std::string>{"windows", "sliding"});
  CHECK(s.eval_lengths == std::vector<int64_t>{128, 256, 512, 1024, 2048});
  // the vision experiment: 5 encodings x 3 seeds, every held-out digit at 8x8, 12x12, 16x16
  auto v = train::load_sweep_spec(RELPOS_SOURCE_DIR "/configs/experiments/vision_digits.yaml");
  CHECK(v.points.size() == 15);
  CHECK(v.eval_modes == std::vector<std::string>{"examples"});
  CHECK(v.eval_lengths == std::vector<int64_t>{64, 144, 256});
  CHECK(v.eval_val_paths ==
        std::vector<std::string>{"data/digits_val.rptok", "data/digits_val12.rptok", "data/digits_val16.rptok"});
}

TEST_CASE("sweep: a point's only: runs its recipe with the listed grid values alone", "[sweep]") {
  // The precision study's bias-scale recipe: alpha scales an additive bias, so it runs on t5
  // and alibi and not on rope (where bias_scale is a config error).
  fs::path dir = fs::temp_directory_path() / "sweep_only";
  fs::create_directories(dir);
  const fs::path p = dir / "spec.yaml";
  std::ofstream(p) << "config: {model: {d_model: 16, n_heads: 2}, train: {steps: 4}}\n"
                   << "grid:\n  model.position.type: [t5, alibi, rope]\n  optim.lr: [0.01, 0.1]\n"
                   << "points:\n  - {name: base}\n"
                   << "  - {name: alpha, set: {model.bias_scale.enabled: true, model.bias_scale.init: 0.1},"
                   << " only: {model.position.type: [t5, alibi]}}\n"
                   << "  - {name: lr_low, only: {optim.lr: 0.01, model.position.type: rope}}\n";
  const train::SweepSpec spec = train::load_sweep_spec(p.string());
  std::vector<std::string> names;
  for (const auto& pt : spec.points) names.push_back(pt.name);
  CHECK(names == std::vector<std::string>{"type=t5 lr=0.01 base", "type=t5 lr=0.01 alpha", "type=t5 lr=0.1 base",
                                          "type=t5 lr=0.1 alpha", "type=alibi lr=0.01 base", "type=alibi lr=0.01 alpha",
                                          "type=alibi lr=0.1 base", "type=alibi lr=0.1 alpha", "type=rope lr=0.01 base",
                                          "type=rope lr=0.01 lr_low", "type=rope lr=0.1 base"});
  for (size_t i = 0; i < spec.points.size(); ++i) CHECK(spec.points[i].index == int64_t(i));
  CHECK(spec.points.back().dir_name == "010_rope_0.1_base");
  // Without the only:, rope x alpha is a point, and its config is refused before anything runs.
  std::ofstream(p) << "config: {model: {d_model: 16, n_heads: 2}, train: {steps: 4}}\n"
                   << "grid:\n  model.position.type: [t5, rope]\n"
                   << "points:\n  - {name: alpha, set: {model.bias_scale.enabled: true}}\n";
  CHECK_THROWS_WITH(train::load_sweep_spec(p.string()),
                    Catch::Contains(p.string() + ": point 'type=rope alpha'") && Catch::Contains("bias_scale"));
}

TEST_CASE("sweep: docs/config.md's spec key tables are the generated ones, and every key in them is read",
          "[sweep][docs]") {
  std::ifstream f(std::string(RELPOS_SOURCE_DIR) + "/docs/config.md");
  REQUIRE(f.good());
  const std::string doc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (const std::string table : {"spec", "eval"}) {
    INFO("table " << table << ": regenerate with `relpos list --sweep --markdown` and paste the block");
    const std::string begin = "<!-- begin: relpos list --sweep --markdown: " + table + " -->\n",
                      end = "<!-- end: " + table + " -->";
    const auto b = doc.find(begin);
    REQUIRE(b != std::string::npos);
    const auto e = doc.find(end, b);
    REQUIRE(e != std::string::npos);
    CHECK(doc.substr(b + begin.size(), e - b - begin.size()) == train::sweep_spec_markdown(table));
  }
  // A spec using every documented key: each lands where it should.
  const fs::path dir = fs::temp_directory_path() / "relpos_test_sweep_allkeys";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "base.yaml") << "model: {kind: decoder, d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32, max_len: 64}\n"
                                      "data: {task: copy, seq_len: 8, vocab_size: 6, batch_size: 2}\n"
                                      "train: {steps: 2, eval_every: 2, eval_batches: 1}\n";
  std::ofstream(dir / "spec.yaml") << "base: base.yaml\nconfig: {optim: {lr: 0.01}}\ndir: " << (dir / "out").string()
                                   << "\ncheckpoint_every: 5\n"
                                      "eval: {lengths: [8, 16], mode: [windows, sliding], stride: 4, bucket: 4, "
                                      "max_tokens: 64}\n"
                                      "grid: {model.position.type: [alibi, t5]}\nseeds: 2\n"
                                      "points: [{name: base}, {name: zl, set: {optim.z_loss: 0.001}, only: "
                                      "{model.position.type: t5}}]\n";
  const train::SweepSpec s = train::load_sweep_spec((dir / "spec.yaml").string());
  CHECK(s.base_overrides == std::vector<std::string>{"optim.lr=0.01"});
  CHECK(s.dir == (dir / "out").string());
  CHECK(s.checkpoint_every == 5);
  CHECK(s.eval_lengths == std::vector<int64_t>{8, 16});
  CHECK(s.eval_modes == std::vector<std::string>{"windows", "sliding"});
  CHECK((s.eval_stride == 4 && s.eval_bucket == 4 && s.eval_max_tokens == 64));
  CHECK(s.grid_keys == std::vector<std::string>{"model.position.type", "train.seed"});
  CHECK(s.recipes == std::vector<std::string>{"base", "zl"});
  CHECK(s.points.size() == 6);  // alibi x 2 seeds x base, t5 x 2 seeds x {base, zl}
  fs::remove_all(dir);
}
