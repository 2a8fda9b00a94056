// `relpos report` (scripts/report.py): for a run and for a sweep, the Markdown report and
// every figure it links exist, every figure is a valid PNG, and the series each figure drew
// (its sidecar JSON) equals the numbers in metrics.jsonl / sweep.jsonl.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "experiments/sweep.h"
#include "trainers/trainer.h"

using namespace relpos;
namespace fs = std::filesystem;

namespace {

int run_cli(const std::string& args) {
  std::string cmd = std::string(RELPOS_CLI_PATH) + " " + args + " > /dev/null 2>&1";
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<nlohmann::json> jsonl(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream f(p);
  for (std::string l; std::getline(f, l);)
    if (!l.empty()) out.push_back(nlohmann::json::parse(l));
  return out;
}

double num(const nlohmann::json& v) { return v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>(); }

// Every figure linked from report.md exists and is a PNG (8-byte signature, IHDR chunk).
int check_figures(const fs::path& out) {
  std::string md = slurp(out / "report.md");
  std::regex img(R"(!\[[^\]]*\]\(([^)]+\.png)\))");
  int n = 0;
  for (auto it = std::sregex_iterator(md.begin(), md.end(), img); it != std::sregex_iterator(); ++it) {
    fs::path p = out / (*it)[1].str();
    INFO(p);
    REQUIRE(fs::exists(p));
    std::string b = slurp(p);
    REQUIRE(b.size() > 1000);
    CHECK(b.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) == 0);
    CHECK(b.compare(12, 4, "IHDR") == 0);
    REQUIRE(fs::exists(fs::path(p).replace_extension(".json")));
    ++n;
  }
  return n;
}

const nlohmann::json& series(const nlohmann::json& fig, const std::string& label) {
  for (const auto& s : fig["series"])
    if (s["label"].get<std::string>().rfind(label, 0) == 0) return s;
  FAIL("no series '" << label << "'");
  static nlohmann::json none;
  return none;
}

// A sweep of tiny copy-task decoders in a fresh temporary folder: `rest` (grid, points, seeds,
// eval) follows the shared config; optim gets `optim` ("{warmup: 0}" plus what the case adds).
train::SweepSpec tiny_sweep(const std::string& name, const std::string& optim, const std::string& rest) {
  fs::path dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "spec.yaml") << "dir: " << (dir / "out").string() << R"(
config:
  model: {d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32, max_len: 64}
  data: {task: copy, vocab_size: 6, seq_len: 5, batch_size: 4}
  optim: )" << optim << R"(
  train: {steps: 4, eval_every: 4, eval_batches: 2, log_every: 2, threads: 1}
)" << rest;
  return train::load_sweep_spec((dir / "spec.yaml").string());
}

}  // namespace

TEST_CASE("report: a run's figures are PNGs and draw exactly metrics.jsonl", "[report][cli]") {
  fs::path dir = fs::temp_directory_path() / "relpos_test_report_run";
  fs::remove_all(dir);
  train::Config c = train::parse_config(R"(model: {d_model: 16, n_layers: 2, n_heads: 2, position: {type: t5},
  bias_scale: {enabled: true, init: 0.1, per_head: true}}
data: {task: copy, vocab_size: 6, seq_len: 5, batch_size: 4}
optim: {lr: 1.0e-2, warmup: 0, clip_grad_norm: 0.5, z_loss: 1.0e-3}
train: {steps: 12, eval_every: 6, eval_batches: 2, log_every: 2, threads: 1}
output: {dir: )" + dir.string() + "}\n", "test");
  train::train(c);
  REQUIRE(run_cli("report " + dir.string() + " --out " + (dir / "rep").string()) == 0);
  CHECK(check_figures(dir / "rep") >= 7);
  auto rows = jsonl(dir / "metrics.jsonl");
  auto fig = [&](const std::string& n) { return nlohmann::json::parse(slurp(dir / "rep" / (n + ".json"))); };
  // loss: train and validation series equal the rows that hold them
  std::vector<double> sx, sy, vx, vy, gx, gy, ax, ay;
  for (auto& r : rows) {
    if (r.contains("loss")) sx.push_back(r["step"]), sy.push_back(num(r["loss"]));
    if (r.contains("val_loss")) vx.push_back(r["step"]), vy.push_back(num(r["val_loss"]));
    if (r.contains("max_attn_logit")) gx.push_back(r["step"]), gy.push_back(num(r["max_attn_logit"][1]));
    if (r.contains("bias_scale")) ax.push_back(r["step"]), ay.push_back(num(r["bias_scale"][0]));
  }
  REQUIRE(sx.size() == 6);
  auto eq = [](const nlohmann::json& s, const std::vector<double>& x, const std::vector<double>& y) {
    REQUIRE(s["x"].size() == x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      CHECK(s["x"][i].get<double>() == x[i]);
      CHECK(s["y"][i].get<double>() == Approx(y[i]).epsilon(1e-12));
    }
  };
  eq(series(fig("loss"), "train loss"), sx, sy);
  eq(series(fig("loss"), "validation loss"), vx, vy);
  eq(series(fig("max_attn_logit"), "layer 1"), gx, gy);
  eq(series(fig("bias_scale"), "alpha 0"), ax, ay);
  CHECK(fig("grad_norm")["ylabel"] == "global L2 norm (pre-clip)");
  CHECK(fs::exists(dir / "rep" / "z_loss.png"));
  CHECK(run_cli("report " + (dir / "nothing").string()) != 0);  // not a directory
  // after `relpos inspect`, the run report adds bias vs distance and the per-bucket gradients
  REQUIRE(run_cli("inspect " + dir.string()) == 0);
  REQUIRE(run_cli("report " + dir.string() + " --out " + (dir / "rep").string()) == 0);
  auto ins = nlohmann::json::parse(slurp(dir / "inspect" / "inspect.json"));
  auto bias = fig("bias_vs_distance");
  REQUIRE(bias["series"].size() == ins["bias"].size());
  for (size_t i = 0; i < ins["bias"].size(); ++i) {
    CHECK(bias["series"][i]["x"] == ins["bias"][i]["distance"]);
    CHECK(bias["series"][i]["y"] == ins["bias"][i]["bias"]);
  }
  CHECK(fig("grad_rows_stack_pos_table")["series"][0]["y"] == ins["position_grad_rows"][0]["row_norm"]);
  // T5's buckets are labelled with their distances (copy task: 2 * 5 + 2 = 12 tokens, bucket b < 16 is
  // distance b; the rows no training distance reaches have exactly zero gradient)
  const auto& gr = ins["position_grad_rows"][0];
  REQUIRE(gr["row_distance"].size() == gr["row_norm"].size());
  CHECK(gr["train_distance"] == 11);
  const auto labels = fig("grad_rows_stack_pos_table")["row_labels"];
  REQUIRE(labels.size() == gr["row_norm"].size());
  CHECK(labels[0] == "0");
  CHECK(labels[5] == "5");
  for (size_t b = 12; b < 16; ++b) CHECK(gr["row_norm"][b].get<double>() == 0);
  CHECK(slurp(dir / "inspect" / "attention_layer0.dot").find("digraph attention") != std::string::npos);
}

TEST_CASE("report: a sweep's extrapolation figure draws sweep.jsonl's eval losses", "[report][cli][sweep]") {
  auto spec = tiny_sweep("relpos_test_report_sweep", "{warmup: 0}", R"(grid:
  model.position.type: [alibi, rope]
  optim.lr: [1.0e-3, 1.0e-2]
points: [{name: base}, {name: qk, set: {model.qk_norm: rmsnorm}}]
eval: {lengths: [5, 10, 20]}
)");
  train::run_sweep(spec);
  REQUIRE(run_cli("report " + spec.dir) == 0);
  fs::path out = fs::path(spec.dir) / "report";
  CHECK(check_figures(out) >= 3);
  auto ext = nlohmann::json::parse(slurp(out / "extrapolation.json"));
  auto recs = jsonl(fs::path(spec.dir) / "sweep.jsonl");
  REQUIRE(ext["series"].size() == recs.size());
  for (size_t i = 0; i < recs.size(); ++i)
    for (size_t k = 0; k < 3; ++k) {
      CHECK(ext["series"][i]["x"][k] == recs[i]["eval"][k]["seq_len"]);
      CHECK(ext["series"][i]["y"][k].get<double>() == Approx(recs[i]["eval"][k]["loss"].get<double>()).epsilon(1e-12));
    }
  auto grid = nlohmann::json::parse(slurp(out / "stability_grid.json"));
  REQUIRE(grid["cells"].size() == recs.size());
  for (auto& cell : grid["cells"]) {
    bool found = false;
    for (auto& r : recs)
      if (r["recipe"] == cell["recipe"] && r["grid"]["model.position.type"] == cell["group"] &&
          std::stod(r["grid"]["optim.lr"].get<std::string>()) == cell["lr"].get<double>()) {
        found = true;
        CHECK(cell["final_train_loss"].get<double>() == Approx(r["final_train_loss"].get<double>()));
      }
    CHECK(found);
  }
  CHECK_THAT(slurp(out / "report.md"), Catch::Contains("| type=") || Catch::Contains("alibi"));
}

TEST_CASE("report: a 2-seed, 2-point sweep is aggregated per point (mean, 95% t-interval) in the table and every figure",
          "[report][cli][sweep]") {
  auto spec = tiny_sweep("relpos_test_report_seeds", "{warmup: 0, lr: 1.0e-2}", R"(grid:
  model.position.type: [alibi, t5]
seeds: 2
eval: {lengths: [5, 10, 20]}
)");
  REQUIRE(spec.points.size() == 4);
  train::run_sweep(spec);
  REQUIRE(run_cli("report " + spec.dir) == 0);
  fs::path out = fs::path(spec.dir) / "report";
  CHECK(check_figures(out) == 3);  // extrapolation, extrapolation_beyond, train_loss_all
  auto recs = jsonl(fs::path(spec.dir) / "sweep.jsonl");
  REQUIRE(recs.size() == 4);
  // Student t(0.975, 1) = 12.706: with two seeds a and b, the interval is mean +- 12.706 |a - b| / 2.
  auto ext = nlohmann::json::parse(slurp(out / "extrapolation.json"));
  REQUIRE(ext["series"].size() == 2);
  for (size_t g = 0; g < 2; ++g) {
    const auto& s = ext["series"][g];
    CHECK(s["label"] == recs[2 * g]["grid"]["model.position.type"]);
    for (size_t k = 0; k < 3; ++k) {
      const double a = recs[2 * g]["eval"][k]["loss"], b = recs[2 * g + 1]["eval"][k]["loss"];
      const double m = (a + b) / 2, h = 12.706 * std::abs(a - b) / 2;
      CHECK(s["x"][k] == recs[2 * g]["eval"][k]["seq_len"]);
      CHECK(s["y"][k].get<double>() == Approx(m).epsilon(1e-12));
      CHECK(s["lo"][k].get<double>() == Approx(m - h).epsilon(1e-9));
      CHECK(s["hi"][k].get<double>() == Approx(m + h).epsilon(1e-9));
    }
  }
  auto curves = nlohmann::json::parse(slurp(out / "train_loss_all.json"));
  REQUIRE(curves["series"].size() == 2);
  CHECK(curves["series"][0]["lo"].size() == curves["series"][0]["x"].size());
  const std::string md = slurp(out / "report.md");
  CHECK_THAT(md, Catch::Contains("Each point ran with 2 seeds") && Catch::Contains("95% Student-t interval"));
  CHECK_THAT(md, Catch::Contains("| alibi | 2 | ") && Catch::Contains("| t5 | 2 | "));
  CHECK_THAT(md, Catch::Contains("Ranking by final validation loss"));
  CHECK_THAT(md, Catch::Contains("Every run:"));
}
