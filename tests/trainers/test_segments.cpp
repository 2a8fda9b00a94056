// Transformer-XL segment memory in the trainer (model.mem_len): consecutive segments per
// batch row, restarts, config checks, a short training run, and segment evaluation.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "trainers/evaluate.h"
#include "trainers/data/segments.h"
#include "trainers/trainer.h"

using namespace relpos;

TEST_CASE("segments: each row continues where its previous segment ended", "[segments]") {
  std::vector<int64_t> ids(100);
  std::iota(ids.begin(), ids.end(), 0);  // token = its stream position
  train::SegmentStream s(ids, 3, 5);
  Generator g(7);
  bool fresh = false;
  train::Batch a = s.next(g, &fresh);
  CHECK(fresh);
  train::Batch b = s.next(g, &fresh);
  CHECK_FALSE(fresh);
  auto ai = a.input.to_vector<int64_t>(), bi = b.input.to_vector<int64_t>(), bt = b.target.to_vector<int64_t>();
  for (int64_t r = 0; r < 3; ++r) {
    CHECK(bi[size_t(r * 5)] == ai[size_t(r * 5 + 4)] + 1);
    for (int64_t t = 0; t < 5; ++t) CHECK(bt[size_t(r * 5 + t)] == bi[size_t(r * 5 + t)] + 1);
  }
  // runs out after a while and restarts every row
  bool restarted = false;
  for (int i = 0; i < 40 && !restarted; ++i) s.next(g, &restarted);
  CHECK(restarted);
  train::SegmentStream c(ids, 4, 6, true);  // contiguous: row r starts at r * 25
  CHECK(c.batches_left() == 4);             // (25 - 1) / 6
  train::Batch cb = c.next(g, &fresh);
  CHECK(cb.input.to_vector<int64_t>()[6] == 25);
  CHECK(c.batches_left() == 3);
}

TEST_CASE("segments: model.mem_len trains with memory and evaluates segment by segment", "[segments][trainer]") {
  std::string dir = (std::filesystem::temp_directory_path() / "relpos_test_txl_mem").string();
  std::filesystem::remove_all(dir);
  const std::string y = R"(model: {d_model: 16, n_layers: 2, n_heads: 2, d_ff: 32, mem_len: 16, position: {type: transformer_xl}}
data: {task: text, path: data/tinyshakespeare.txt, seq_len: 8, batch_size: 4}
optim: {lr: 3.0e-3, warmup: 0}
train: {steps: 6, eval_every: 6, eval_batches: 2, log_every: 2, threads: 1}
output: {dir: )" + dir + "}\n";
  train::Config c = train::parse_config(y, "test");
  CHECK(c.model.mem_len == 16);
  auto r = train::train(c);
  REQUIRE(r.losses.size() == 6);
  for (double l : r.losses) CHECK(std::isfinite(l));
  // the same run without memory trains on other batches: another loss curve
  std::filesystem::remove_all(dir + "_0");  // a new run refuses a non-empty output.dir
  train::Config c0 = train::parse_config(y, "test", {"model.mem_len=0", "output.dir=" + dir + "_0"});
  CHECK(train::train(c0).losses != r.losses);
  auto run = train::load_run(dir);
  train::EvalOptions o;
  o.mode = "segments";
  o.seq_len = 8;
  o.max_tokens = 96;  // 3 batches of 4 x 8
  auto e = train::evaluate_positions(*run.model, *run.data, run.cfg, o);
  CHECK(e.mode == "segments");
  CHECK(e.stride == 16);  // the memory length used
  CHECK(e.tokens == 96);
  o.mem_len = 0;
  auto e0 = train::evaluate_positions(*run.model, *run.data, run.cfg, o);
  CHECK(e0.tokens == 96);
  CHECK(e0.loss != e.loss);  // memory changes what the later segments see
  CHECK_THROWS_WITH(train::parse_config(y, "test", {"model.position.type=sinusoidal"}), Catch::Contains("mem_len"));
}
