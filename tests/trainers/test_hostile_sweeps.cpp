// Sweeps that cannot lie: a recipe that sets a key the grid varies (train.seed with seeds: N
// would make N "seeds" one seed), points that fail for a reason other than training (a run
// directory locked by another process, a device that is not there): the reason is in the
// output and the summary, not only in the index.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "../trainers/hostile_helpers.h"
#include "sweep_helpers.h"
#include "experiments/sweep.h"
#include "trainers/io/file_io.h"

using namespace relpos;
using namespace relpos::hostile;
using Catch::Contains;

TEST_CASE("hostile sweeps: a recipe that sets a grid key (train.seed under seeds: N) is refused", "[hostile][sweep]") {
  const std::string d = tmp("sweep_seedset");
  fs::create_directories(d);
  const std::string p = d + "/spec.yaml";
  std::ofstream(p) << "config: {model: {d_model: 16, n_heads: 2}, train: {steps: 4}}\n"
                      "seeds: 3\n"
                      "points:\n  - {name: a, set: {train.seed: 7}}\n";
  CHECK_THROWS_WITH(train::load_sweep_spec(p), Contains(p + ":4: points[a].set") && Contains("train.seed") &&
                                                   Contains("every seed would run with the same seed"));
  std::ofstream(p) << "config: {model: {d_model: 16, n_heads: 2}, train: {steps: 4}}\n"
                      "grid: {model.position.type: [alibi, t5]}\n"
                      "points:\n  - {name: a, set: {model.position.type: rope}}\n";
  CHECK_THROWS_WITH(train::load_sweep_spec(p), Contains("points[a].set") && Contains("model.position.type") &&
                                                   Contains("grid key"));
  // The CLI: exit 2, nothing run.
  Run r = cli("sweep " + p + " --dir " + d + "/out");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(!fs::exists(d + "/out"));
  // A set of another key is fine.
  std::ofstream(p) << "config: {model: {d_model: 16, n_heads: 2}, train: {steps: 4}}\n"
                      "seeds: 2\npoints:\n  - {name: a, set: {optim.lr: 0.01}}\n";
  CHECK(train::load_sweep_spec(p).points.size() == 2);
}

TEST_CASE("hostile sweeps: a point that fails before training says why in the output and the summary",
          "[hostile][sweep]") {
  const std::string d = tmp("sweep_locked");
  fs::create_directories(d);
  std::ofstream(d + "/spec.yaml") << "dir: " << d << "/out\n" << test::kTinySweepSpec;
  const auto spec = train::load_sweep_spec(d + "/spec.yaml");
  // Another process holds the first point's run directory.
  const std::string run0 = d + "/out/" + spec.points[0].dir_name;
  fs::create_directories(run0);
  Run r;
  {
    DirLock other(run0, "run directory");
    r = cli("sweep " + d + "/spec.yaml");
  }
  INFO(r.out);
  CHECK(r.code == 1);
  // The point's own line names the reason (the lock), not a loss of NaN.
  CHECK_THAT(r.out, Contains("[" + spec.points[0].name + "] failed: ") && Contains("lock"));
  CHECK_THAT(r.out, !Contains("failed: train loss nan"));
  // ... and the summary under the table.
  CHECK_THAT(r.out, Contains("failed: #0 " + spec.points[0].name + ": "));
  // The other points ran.
  CHECK_THAT(r.out, Contains("[" + spec.points[1].name + "] done"));
}
