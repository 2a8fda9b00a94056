// Data: text files (UTF-8, errors), synthetic task layouts checked against their definitions.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "trainers/data/data.h"

using namespace relpos;
using Catch::Contains;

namespace {
train::Config cfg_for(const std::string& kind, const std::string& task, int64_t seq_len, int64_t vocab = 12) {
  train::Config c;
  c.model.kind = *parse_enum<nn::ModelKind>(kind);
  c.data.task = task;
  c.data.seq_len = seq_len;
  c.data.batch_size = 4;
  c.data.vocab_size = vocab;
  return c;
}
std::string write_tmp(const std::string& name, const std::string& bytes) {
  std::string p = (std::filesystem::temp_directory_path() / ("relpos_test_" + name)).string();
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}
}  // namespace

TEST_CASE("data: text vocabulary is the sorted set of UTF-8 characters, batches are shifted windows", "[data]") {
  std::string text;
  for (int i = 0; i < 50; ++i) text += "héllo wörld ";
  auto c = cfg_for("decoder", "text", 8);
  c.data.path = write_tmp("utf8.txt", text);
  auto d = train::make_dataset(c);
  auto v = d->vocabulary();
  // the distinct characters of "héllo wörld " (there is no plain 'e' in it)
  REQUIRE(v == std::vector<std::string>{" ", "d", "h", "l", "o", "r", "w", "é", "ö"});
  Generator g(1);
  train::Batch b = d->train_batch(g);
  REQUIRE(b.input.shape() == Shape{4, 8});
  auto x = b.input.to_vector<int64_t>(), y = b.target.to_vector<int64_t>();
  // Every row of a training and a validation batch is a window of the text; its targets are the
  // same window shifted by one character (the next character at every position, the last one
  // included).
  auto check_windows = [&](const train::Batch& batch) {
    const int64_t B = batch.input.size(0), L = batch.input.size(1);
    auto xs = batch.input.to_vector<int64_t>(), ys = batch.target.to_vector<int64_t>();
    for (int64_t r = 0; r < B; ++r) {
      std::vector<int64_t> xr(xs.begin() + r * L, xs.begin() + (r + 1) * L),
          yr(ys.begin() + r * L, ys.begin() + (r + 1) * L);
      for (int64_t t = 0; t + 1 < L; ++t) REQUIRE(yr[size_t(t)] == xr[size_t(t + 1)]);
      std::vector<int64_t> window = xr;
      window.push_back(yr.back());
      INFO("row " << r << ": '" << d->decode(window) << "'");
      REQUIRE(text.find(d->decode(window)) != std::string::npos);
    }
  };
  check_windows(b);
  check_windows(d->train_batch(g));
  check_windows(d->val_batch(0, 8));
  REQUIRE(d->decode(d->encode("wörld")) == "wörld");
  REQUIRE(d->val_batch(3, 8).input.to_vector<int64_t>() == d->val_batch(3, 8).input.to_vector<int64_t>());
}

TEST_CASE("data: bad text files are clear errors", "[data]") {
  auto c = cfg_for("decoder", "text", 8);
  c.data.path = "/nonexistent/x.txt";
  REQUIRE_THROWS_WITH(train::make_dataset(c), Contains("/nonexistent/x.txt") && Contains("does not exist"));
  c.data.path = write_tmp("empty.txt", "");
  REQUIRE_THROWS_WITH(train::make_dataset(c), Contains("empty"));
  c.data.path = write_tmp("bad.txt", std::string(100, 'a') + "\xff\xfe" + std::string(100, 'b'));
  REQUIRE_THROWS_WITH(train::make_dataset(c), Contains("invalid UTF-8 at byte offset 100"));
  c.data.path = write_tmp("short.txt", "abc");
  REQUIRE_THROWS_WITH(train::make_dataset(c), Contains("too short"));
}

TEST_CASE("data: decoder layout [BOS x SEP y EOS] with loss only on y and EOS", "[data]") {
  auto d = train::make_dataset(cfg_for("decoder", "reverse", 3));
  train::Batch b = d->val_batch(0, 3);
  REQUIRE(b.input.shape() == Shape{4, 8});  // 1 + 3 + 1 + 3 + 1 - 1
  auto x = b.input.to_vector<int64_t>(), y = b.target.to_vector<int64_t>();
  // row 0: BOS a b c SEP c b a | targets: ignore x4, then c b a EOS
  REQUIRE(x[0] == 1);
  REQUIRE(x[4] == 2);
  for (int t = 0; t < 4; ++t) REQUIRE(y[size_t(t)] == train::kIgnore);
  REQUIRE(y[4] == x[3]);
  REQUIRE(y[5] == x[2]);
  REQUIRE(y[6] == x[1]);
  REQUIRE(y[7] == 3);  // EOS
}

TEST_CASE("data: addition targets are the digits of the sum", "[data]") {
  auto d = train::make_dataset(cfg_for("encoder_decoder", "addition", 3));
  train::Batch b = d->val_batch(1, 3);
  auto x = b.input.to_vector<int64_t>(), y = b.target.to_vector<int64_t>();
  const int64_t Lx = b.input.size(1), Ly = b.target.size(1);
  REQUIRE(Lx == 7);  // 3 digits + '+' + 3 digits
  REQUIRE(Ly == 5);  // 4 sum digits + EOS
  for (int64_t r = 0; r < 4; ++r) {
    int64_t a = 0, c = 0, s = 0;
    for (int i = 0; i < 3; ++i) a = a * 10 + (x[size_t(r * Lx + i)] - 4);
    REQUIRE(x[size_t(r * Lx + 3)] - 4 == 10);  // '+'
    for (int i = 4; i < 7; ++i) c = c * 10 + (x[size_t(r * Lx + i)] - 4);
    for (int i = 0; i < 4; ++i) s = s * 10 + (y[size_t(r * Ly + i)] - 4);
    REQUIRE(s == a + c);
    REQUIRE(y[size_t(r * Ly + 4)] == 3);
  }
  REQUIRE(b.dec_input.to_vector<int64_t>()[0] == 1);  // BOS
}

TEST_CASE("data: encoder sort labels, recall answers, padding masks", "[data]") {
  auto c = cfg_for("encoder", "sort", 6);
  c.data.min_len = 2;
  auto d = train::make_dataset(c);
  Generator g(5);
  train::Batch b = d->train_batch(g);
  auto x = b.input.to_vector<int64_t>(), y = b.target.to_vector<int64_t>();
  auto pad = b.padding.to_vector<double>();
  const int64_t L = b.input.size(1);
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<int64_t> xs;
    for (int64_t t = 0; t < L; ++t)
      if (pad[size_t(r * L + t)] == 0) xs.push_back(x[size_t(r * L + t)]);
      else REQUIRE(y[size_t(r * L + t)] == train::kIgnore);
    std::sort(xs.begin(), xs.end());
    for (size_t t = 0; t < xs.size(); ++t) REQUIRE(y[size_t(r * L) + t] == xs[t]);
  }
  auto rc = train::make_dataset(cfg_for("encoder_decoder", "recall", 6));
  train::Batch rb = rc->val_batch(0, 6);
  auto rx = rb.input.to_vector<int64_t>(), ry = rb.target.to_vector<int64_t>();
  // x = k1 v1 k2 v2 k3 v3 q: the answer is the value after the key equal to q
  for (int64_t r = 0; r < 4; ++r) {
    int64_t q = rx[size_t(r * 7 + 6)], want = -1;
    for (int i = 0; i < 3; ++i)
      if (rx[size_t(r * 7 + 2 * i)] == q) want = rx[size_t(r * 7 + 2 * i + 1)];
    REQUIRE(ry[size_t(r * 2)] == want);
  }
  REQUIRE_THROWS_WITH(train::make_dataset(cfg_for("encoder", "recall", 6)), Contains("decoder or an encoder_decoder"));
  REQUIRE_THROWS_WITH(train::make_dataset(cfg_for("decoder", "addition", 3, 8)), Contains("vocab_size >= 11"));
}

TEST_CASE("data: patch_grid labels each patch with the patch below it", "[data]") {
  auto c = cfg_for("encoder", "patch_grid", 6);
  c.data.grid_h = 2;
  c.data.grid_w = 3;
  c.data.seq_len = 6;
  auto d = train::make_dataset(c);
  train::Batch b = d->val_batch(0, 6);
  auto x = b.input.to_vector<int64_t>(), y = b.target.to_vector<int64_t>();
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t p = 0; p < 6; ++p) REQUIRE(y[size_t(r * 6 + p)] == x[size_t(r * 6 + (p + 3) % 6)]);
}

TEST_CASE("data: graph labels are shortest-path distances to node 0 and come with the SPD index", "[data]") {
  auto c = cfg_for("encoder", "graph", 7, 5);
  c.data.edge_prob = 0.3;
  auto d = train::make_dataset(c);
  train::Batch b = d->val_batch(2, 7);
  REQUIRE(b.position_index.shape() == Shape{4, 7, 7});
  auto spd = b.position_index.to_vector<int64_t>();
  auto y = b.target.to_vector<int64_t>();
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t i = 0; i < 7; ++i) {
      int64_t dist = spd[size_t((r * 7 + i) * 7)];
      REQUIRE(spd[size_t((r * 7 + i) * 7 + i)] == 0);
      REQUIRE(dist == spd[size_t((r * 7) * 7 + i)]);  // undirected: spd(i, 0) = spd(0, i)
      int64_t want = dist < 0 ? 4 : std::min<int64_t>(dist, 3);
      REQUIRE(y[size_t(r * 7 + i)] - 4 == want);
    }
}
