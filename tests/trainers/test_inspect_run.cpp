// `relpos inspect` views (experiments/inspect_run.h): ALiBi's bias vs distance against its slopes,
// T5 buckets that no training distance reaches get exactly zero gradient, attention maps are
// causal distributions, the DOT graph names every parameter, one-entry gradcheck agrees.
#include <catch2/catch.hpp>

#include <cmath>

#include "experiments/inspect_run.h"
#include "trainers/trainer.h"

using namespace relpos;

namespace {
train::Config cfg_for(const std::string& pos) {
  return train::parse_config("model: {d_model: 16, n_layers: 2, n_heads: 4, d_ff: 32, position: {type: " + pos +
                                 "}}\ndata: {task: copy, vocab_size: 6, seq_len: 3, batch_size: 4}\n",
                             "test");
}
}  // namespace

TEST_CASE("inspect: ALiBi bias vs distance is slope_h * distance (slopes 1/4, 1/16, 1/64, 1/256)", "[inspect]") {
  train::Config c = cfg_for("alibi");
  nn::Model m(c.model, 1);
  auto curves = train::learned_bias(m, 8);
  REQUIRE(curves.size() == 4);  // 4 heads, the same in both layers: listed once, layer -1
  for (auto& cv : curves) CHECK(cv.layer == -1);
  const double slopes[4] = {0.25, 1.0 / 16, 1.0 / 64, 1.0 / 256};
  for (auto& cv : curves) {
    REQUIRE(cv.distance.size() == 8);
    for (size_t i = 0; i < 8; ++i) {
      CHECK(cv.distance[i] == -int64_t(i));
      CHECK(cv.bias[i] == Approx(-slopes[cv.head] * double(i)).margin(1e-7));
    }
  }
  std::string note;
  CHECK(train::learned_bias(nn::Model(cfg_for("rope").model, 1), 8, &note).empty());
  CHECK_THAT(note, Catch::Contains("rope"));
}

TEST_CASE("inspect: T5 buckets beyond the training distances get exactly zero gradient", "[inspect]") {
  train::Config c = cfg_for("t5");
  auto data = train::make_dataset(c);
  nn::Model m(c.model, 1);
  auto rows = train::position_grad_rows(m, *data, 3);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].param == "stack.pos.table");
  REQUIRE(rows[0].row_norm.size() == 32);
  // copy with seq_len 3: sequences of 2 * 3 + 2 = 8 tokens, causal distances 0..7 -> buckets 0..7
  for (size_t b = 0; b < 8; ++b) CHECK(rows[0].row_norm[b] > 0);
  for (size_t b = 8; b < 32; ++b) CHECK(rows[0].row_norm[b] == 0);
  // Each bucket's distances (causal: kj - qi <= 0), probed to 256: buckets 0..15 are exact
  // (distance -b), the last one holds everything from some distance up to the probe's end.
  CHECK(rows[0].train_distance == 7);
  CHECK(rows[0].probe_distance == 256);
  REQUIRE(rows[0].row_distances.size() == 32);
  for (int64_t b = 0; b < 16; ++b) {
    REQUIRE(rows[0].row_distances[size_t(b)].has_value());
    CHECK(*rows[0].row_distances[size_t(b)] == std::make_pair(-b, -b));
  }
  for (size_t b = 16; b < 32; ++b) REQUIRE(rows[0].row_distances[b].has_value());
  for (size_t b = 17; b < 32; ++b)  // contiguous, farther with each bucket
    CHECK(rows[0].row_distances[b]->second == rows[0].row_distances[b - 1]->first - 1);
  CHECK(rows[0].row_distances[31]->first == -256);
  CHECK(rows[0].row_distances[31]->second >= -128);  // T5: distances from max_distance (128) on share the last bucket
  // tables not indexed by distance get no ranges: the learned absolute table
  train::Config ca = cfg_for("learned");
  nn::Model ma(ca.model, 1);
  for (auto& r : train::position_grad_rows(ma, *train::make_dataset(ca), 3)) CHECK(r.row_distances.empty());
}

TEST_CASE("inspect: attention maps are causal distributions, the DOT graph names every parameter", "[inspect]") {
  train::Config c = cfg_for("t5");
  nn::Model m(c.model, 1);
  auto maps = train::attention_maps(m, Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5}, {1, 5}));
  REQUIRE(maps.size() == 2);
  REQUIRE(maps[0].shape() == Shape{4, 5, 5});
  auto v = maps[1].to_vector<double>();
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t i = 0; i < 5; ++i) {
      double s = 0;
      for (int64_t j = 0; j < 5; ++j) {
        s += v[size_t((h * 5 + i) * 5 + j)];
        if (j > i) CHECK(v[size_t((h * 5 + i) * 5 + j)] == 0);
      }
      CHECK(s == Approx(1.0));
    }
  std::string dot = train::attention_graph_dot(m, 4);
  CHECK_THAT(dot, Catch::StartsWith("// autograd graph"));
  CHECK_THAT(dot, Catch::Contains("digraph attention"));
  // T5 takes the fused attention path: one fused_attention node, fed by the projections and by
  // the stack's shared bias table (named by its model path); no materialised softmax.
  for (const char* p : {"q_proj.weight", "k_proj.bias", "v_proj.weight", "o_proj.weight", "input x",
                        "fused_attention", "stack.pos.table", "[1, 4, 4, 4]"})
    CHECK_THAT(dot, Catch::Contains(p));
  CHECK_THAT(dot, !Catch::Contains("AccumulateGrad"));  // every leaf is named
}

TEST_CASE("gradcheck --entry: analytic and numeric agree for one T5 table entry", "[inspect][gradcheck]") {
  auto r = train::entry_gradcheck("t5", {}, "pos.table", {3, 1});
  CHECK(r.param == "pos.table");
  CHECK(std::abs(r.analytic) > 1e-6);
  CHECK(r.analytic == Approx(r.numeric).epsilon(1e-6));
  CHECK_THROWS_WITH(train::entry_gradcheck("t5", {}, "nope", {}), Catch::Contains("pos.table"));
}
