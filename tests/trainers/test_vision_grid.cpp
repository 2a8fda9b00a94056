// The vision domain's data path end to end through the CLI: token files whose examples are 2D
// grids (per-token `row` and `col` channels, a per-example `label`), the cpe encoding reading
// them, resolution transfer at evaluation (--val-path, --mode examples), and the hostile inputs:
// coordinates out of range, a grid that does not match the token count, images of mixed sizes
// in one file (so in one batch), tokens out of row-major order, an evaluation length that cuts
// the grid, and cpe without the channels. Each is a clear error naming the file, the example
// and the channel.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "../cli_run.h"
#include "../helpers.h"
#include "trainers/data/token_file.h"

using namespace relpos;
using namespace relpos::train;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

std::string tmp_dir(const std::string& name) { return test::scratch_dir("relpos_vision_" + name); }

void spit(const std::string& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << bytes;
}

test::CliRun relpos_cli(const std::string& args) { return test::cli_run("--threads 1 " + args, 300); }

// n examples, each an h x w grid (row-major) of intensities 0..4; label = the brightest row mod 4.
// `edit` may change an example's tokens / coordinates before the file is written.
struct Images {
  std::vector<int64_t> tokens;
  std::vector<int32_t> rows, cols, labels;
  std::vector<uint64_t> starts;
  int64_t max_row = 0, max_col = 0;
  void add(int64_t h, int64_t w, uint64_t seed) {
    starts.push_back(tokens.size());
    int64_t best = 0, best_sum = -1;
    for (int64_t r = 0; r < h; ++r) {
      int64_t sum = 0;
      for (int64_t c = 0; c < w; ++c) {
        const int64_t v = int64_t((seed * 2654435761u + uint64_t(r * 31 + c * 7)) % 5);
        tokens.push_back(v), rows.push_back(int32_t(r)), cols.push_back(int32_t(c));
        sum += v;
      }
      if (sum > best_sum) best_sum = sum, best = r;
    }
    labels.push_back(int32_t(best % 4));
    max_row = std::max(max_row, h - 1), max_col = std::max(max_col, w - 1);
  }
  void write(const std::string& path, int64_t declared_row = -1, int64_t declared_col = -1) const {
    write_token_file(path, 5, tokens, starts, {},
                     {{"row", ChannelScope::Token, 0, declared_row >= 0 ? declared_row : max_row},
                      {"col", ChannelScope::Token, 0, declared_col >= 0 ? declared_col : max_col},
                      {"label", ChannelScope::Example, 0, 3}},
                     {rows, cols, labels});
  }
};

Images grid_set(int64_t n, int64_t h, int64_t w, uint64_t seed0 = 1) {
  Images im;
  for (int64_t e = 0; e < n; ++e) im.add(h, w, seed0 + uint64_t(e));
  return im;
}

std::string config(const std::string& d, const std::string& type_and_params, int64_t seq_len = 16) {
  return "model: {kind: encoder, d_model: 16, n_layers: 2, n_heads: 2, d_ff: 32, max_len: 64, position: {" +
         type_and_params + "}}\n"
         "data: {task: token_labels, path: " + d + "/train.rptok, val_path: " + d + "/val.rptok, "
         "position_channels: [row, col], seq_len: " + std::to_string(seq_len) + ", batch_size: 8}\n"
         "optim: {lr: 3.0e-3, warmup: 2}\n"
         "train: {steps: 6, eval_every: 6, eval_batches: 1, log_every: 3, checkpoint_every: 6}\n"
         "output: {dir: " + d + "/run}\n";
}

}  // namespace

TEST_CASE("vision: cpe, learned and relative_2d train on 4x4 grids and evaluate on 6x6 ones", "[tokens][vision]") {
  const std::string d = tmp_dir("transfer");
  grid_set(40, 4, 4).write(d + "/train.rptok");
  grid_set(12, 4, 4, 500).write(d + "/val.rptok");
  grid_set(12, 6, 6, 900).write(d + "/val6.rptok");
  for (const std::string pos : {"type: cpe", "type: learned, grid_h: 4, grid_w: 4", "type: relative_2d, grid_h: 4, grid_w: 4",
                                "type: sinusoidal", "type: none"}) {
    INFO(pos);
    spit(d + "/c.yaml", config(d, pos));
    const test::CliRun r = relpos_cli("train " + d + "/c.yaml --overwrite");
    INFO(r.out);
    REQUIRE(r.code == 0);
    const test::CliRun e = relpos_cli("eval " + d + "/run --mode examples --json");
    INFO(e.out);
    REQUIRE(e.code == 0);
    CHECK_THAT(e.out, Contains("\"windows\":12"));  // every validation image once
    const test::CliRun t = relpos_cli("eval " + d + "/run --mode examples --seq-len 36 --val-path " + d + "/val6.rptok --json");
    INFO(t.out);
    REQUIRE(t.code == 0);
    CHECK_THAT(t.out, Contains("\"seq_len\":36"));
    // An evaluation length that would cut the 6x6 grids is refused, naming the file.
    const test::CliRun cut = relpos_cli("eval " + d + "/run --mode examples --seq-len 20 --val-path " + d + "/val6.rptok");
    CHECK(cut.code == 2);
    CHECK_THAT(cut.out, Contains("val6.rptok': its examples are grids of 36 tokens"));
  }
  fs::remove_all(d);
}

TEST_CASE("vision: hostile grids are refused naming the file, the example and the channel", "[tokens][vision]") {
  const std::string d = tmp_dir("hostile");
  grid_set(12, 4, 4, 500).write(d + "/val.rptok");
  spit(d + "/c.yaml", config(d, "type: cpe"));
  auto validate_error = [&](const Images& train) {
    train.write(d + "/train.rptok");
    const test::CliRun r = relpos_cli("validate " + d + "/c.yaml");
    INFO(r.out);
    CHECK(r.code == 2);
    return r.out;
  };
  {  // a coordinate outside the grid the file declares
    Images im = grid_set(6, 4, 4);
    im.rows[size_t(16 * 2 + 5)] = 7;
    im.write(d + "/train.rptok", 3, 3);
    const test::CliRun r = relpos_cli("validate " + d + "/c.yaml");
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains("train.rptok"));
    CHECK_THAT(r.out, Contains("channel 'row'[37] = 7 is outside its declared range [0, 3] (example 2, its token 5)"));
  }
  {  // a grid that does not match the token count: an example of 15 tokens in a 4x4 file
    Images im = grid_set(6, 4, 4);
    im.tokens.pop_back(), im.rows.pop_back(), im.cols.pop_back();
    const std::string out = validate_error(im);
    CHECK_THAT(out, Contains("data.path '" + d + "/train.rptok': example 5 has 15 tokens, but the file's channels "
                                                 "'row' [0, 3] and 'col' [0, 3] make every example a 4x4 grid of 16"));
  }
  {  // images of mixed sizes: a 4x4 and a 3x3 image in one file (one batch would mix them)
    Images im = grid_set(5, 4, 4);
    im.add(3, 3, 77);
    const std::string out = validate_error(im);
    CHECK_THAT(out, Contains("example 5 has 9 tokens"));
    CHECK_THAT(out, Contains("one grid size per file: a batch never mixes sizes"));
  }
  {  // tokens out of row-major order: two pixels swapped with their coordinates
    Images im = grid_set(6, 4, 4);
    std::swap(im.cols[size_t(16 * 3 + 1)], im.cols[size_t(16 * 3 + 2)]);
    const std::string out = validate_error(im);
    CHECK_THAT(out, Contains("example 3, token 1: channel 'col' is 2, expected 1"));
  }
  {  // a grid whose coordinates do not start at 0
    Images im = grid_set(6, 4, 4);
    write_token_file(d + "/train.rptok", 5, im.tokens, im.starts, {},
                     {{"row", ChannelScope::Token, -1, 3}, {"col", ChannelScope::Token, 0, 3},
                      {"label", ChannelScope::Example, 0, 3}},
                     {im.rows, im.cols, im.labels});
    const test::CliRun r = relpos_cli("validate " + d + "/c.yaml");
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains("a grid's coordinates start at 0"));
  }
  grid_set(6, 4, 4).write(d + "/train.rptok");
  {  // a training length that cuts the grid
    spit(d + "/short.yaml", config(d, "type: cpe", 12));
    const test::CliRun r = relpos_cli("train " + d + "/short.yaml --overwrite");
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains("train.rptok': its examples are grids of 16 tokens (channels 'row' and 'col'), but "
                               "data.seq_len is 12"));
  }
  {  // cpe without the channels it reads
    std::string c = config(d, "type: cpe");
    const std::string list = "position_channels: [row, col], ";
    c.erase(c.find(list), list.size());
    spit(d + "/nochan.yaml", c);
    const test::CliRun r = relpos_cli("validate " + d + "/nochan.yaml");
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains("model.position 'cpe' reads the per-token position channel 'row', but "
                               "data.position_channels lists none"));
  }
  fs::remove_all(d);
}
