// The sweep runner (trainers/sweep.h): the point list of grid x recipes, one run directory and
// one sweep.jsonl line per point, finished points skipped on a re-run, an interrupted point
// resumed from its checkpoint, evaluation lengths recorded per point.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "relpos/trainers/sweep.h"
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
