// Hostile time channels (model.position.distance: time, the Bach-chorale setting of docs/data.md):
// a time that goes backwards within an example, a time past the channel's declared range, an
// example (a chorale) longer than the file says — each a clear error naming the file, the
// example and the channel or field, never a crash or silent use.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "../helpers.h"
#include "core/error.h"
#include "trainers/config.h"
#include "trainers/data/data.h"
#include "trainers/data/token_file.h"

using namespace relpos;
using namespace relpos::train;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

std::string tmp_dir(const std::string& name) { return test::scratch_dir("relpos_time_" + name); }

// Two examples of 4 and 12 tokens over a vocabulary of 6, a `time` channel in [0, hi].
std::string write_file(const std::string& path, const std::vector<int32_t>& time, int64_t hi = 40,
                       std::vector<uint64_t> starts = {0, 4}) {
  std::vector<int64_t> tokens(time.size());
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int64_t(i % 6);
  write_token_file(path, 6, tokens, starts, {}, {TokenChannel{"time", ChannelScope::Token, 0, hi}}, {time});
  return path;
}

// The error of building the dataset of a tiny decoder on `path` whose T5 reads distances from
// `distance` (empty: none).
std::string dataset_error(const std::string& path, const std::string& distance) {
  const std::string yaml =
      "model: {kind: decoder, d_model: 8, n_layers: 1, n_heads: 2, d_ff: 16, max_len: 64,\n"
      "        position: {type: t5, distance: " +
      distance +
      "}}\n"
      "data: {task: tokens, path: " +
      path + ", val_path: " + path + ", position_channels: [time], seq_len: 4, batch_size: 2}\n";
  try {
    const Config c = parse_config(yaml, "test.yaml");
    make_dataset(c);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const std::vector<int32_t> kMonotone = {0, 1, 2, 3, 4, 4, 6, 8, 9, 9, 9, 12, 13, 14, 16, 18};

}  // namespace

TEST_CASE("time channel: a time that goes backwards within an example is refused by name", "[data][channel][hostile]") {
  const std::string d = tmp_dir("backwards");
  REQUIRE(dataset_error(write_file(d + "/ok.rptok", kMonotone), "time").empty());
  std::vector<int32_t> back = kMonotone;
  back[9] = 7;  // example 1 = tokens 4..15: ... 8 9 7 ...
  const std::string p = write_file(d + "/back.rptok", back);
  const std::string e = dataset_error(p, "time");
  CHECK_THAT(e, Contains("token file '" + p + "', example 1 (tokens 4..15), channel 'time'") &&
                    Contains("goes backwards at token 9 (7 after 9)") && Contains("model.position.distance"));
  // Across examples the clock may restart (a file of separately timed pieces); only the
  // distance channel is held to the rule: the same file with token distances trains.
  std::vector<int32_t> restart = kMonotone;
  for (size_t i = 4; i < restart.size(); ++i) restart[i] -= 4;
  CHECK(dataset_error(write_file(d + "/restart.rptok", restart), "time").empty());
  CHECK(dataset_error(p, "index").empty());
  fs::remove_all(d);
}

TEST_CASE("time channel: a time past the declared range names the file, example and channel",
          "[data][channel][hostile]") {
  const std::string d = tmp_dir("range");
  std::vector<int32_t> t = kMonotone;
  t[13] = 50;
  t[14] = 51, t[15] = 52;  // still non-decreasing: the range is what is wrong
  const std::string p = write_file(d + "/range.rptok", t, 20);
  const std::string e = dataset_error(p, "time");
  CHECK_THAT(e, Contains(p) && Contains("channel 'time'[13] = 50 is outside its declared range [0, 20]") &&
                    Contains("(example 1, its token 9)"));
  fs::remove_all(d);
}

TEST_CASE("time channel: a chorale longer than the file says is refused by name", "[data][channel][hostile]") {
  const std::string d = tmp_dir("longer");
  // example_starts say example 1 runs to token 20; the file holds 16 tokens
  const std::string p = write_file(d + "/long.rptok", kMonotone, 40, {0, 4, 20});
  const std::string e = dataset_error(p, "time");
  CHECK_THAT(e, Contains(p) && Contains("field 'example_starts'[2] = 20") &&
                    Contains("example 1 would end at token 20, past the file's n_tokens = 16"));
  // more token bytes than the header declares: the file size disagrees with the header
  const std::string q = write_file(d + "/extra.rptok", kMonotone);
  {
    std::ofstream f(q, std::ios::binary | std::ios::app);
    f << std::string(16, '\0');
  }
  CHECK_THAT(dataset_error(q, "time"), Contains(q) && Contains("the header describes"));
  fs::remove_all(d);
}
