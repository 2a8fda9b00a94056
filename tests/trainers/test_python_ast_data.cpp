// The code domain's data (docs/data.md, "Python syntax trees"): the shipped
// data/python_ast_{train,val}.rptok are what scripts/prepare_python_ast.py writes from the
// Python 3.11 standard library of this machine (checked only where the listed source files have
// the SHA-256s of data/python_ast_sources.txt and python3 is 3.11: the standard library is
// versioned, so elsewhere the case says so and checks nothing), their trees pass the channel
// checks, and a file cut inside an example is refused naming the file.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../cli_run.h"
#include "core/error.h"
#include "nn/positional/ast_tree.h"
#include "trainers/data/token_file.h"
#include "trainers/evaluate.h"

using namespace relpos;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

std::string tmp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("relpos_pyast_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

const std::string kData = RELPOS_SOURCE_DIR "/data/python_ast";

// The token-scope channel `name` of f, whole.
std::vector<int32_t> channel(const train::TokenFile& f, const std::string& name) {
  const auto& ch = f.info().channels;
  for (size_t c = 0; c < ch.size(); ++c)
    if (ch[c].name == name) {
      std::vector<int32_t> v(f.info().n_tokens);
      for (uint64_t i = 0; i < v.size(); ++i) v[i] = int32_t(f.channel(c, i));
      return v;
    }
  FAIL(f.path() << " has no channel '" << name << "'");
  return {};
}

}  // namespace

TEST_CASE("data/: the shipped Python AST token files are what scripts/prepare_python_ast.py writes",
          "[tokens][python][ast]") {
  const test::CliRun v = test::shell_run("python3 -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 3)'"
                                         " && python3 " RELPOS_SOURCE_DIR "/scripts/prepare_python_ast.py "
                                         "--verify-sources " + kData + "_sources.txt");
  if (v.code != 0) {
    WARN("not checked: this machine's python3 is not 3.11 or its standard library differs from the one the shipped "
         "data was prepared from (data/python_ast_sources.txt): "
         << v.out);
    return;
  }
  const std::string d = tmp_dir("shipped");
  const test::CliRun w = test::shell_run("python3 " RELPOS_SOURCE_DIR "/scripts/prepare_python_ast.py " + d + "/python_ast");
  INFO(w.out);
  REQUIRE(w.code == 0);
  for (const char* f : {"_train.rptok", "_val.rptok", "_sources.txt"}) {
    INFO(f << ": regenerate with scripts/prepare_python_ast.py data/python_ast");
    const std::string shipped = slurp(kData + f);
    CHECK(!shipped.empty());
    CHECK(shipped == slurp(d + "/python_ast" + f));
  }
  fs::remove_all(d);
}

TEST_CASE("data/: the shipped Python AST files hold trees that pass the channel checks", "[tokens][ast]") {
  for (const char* split : {"_train.rptok", "_val.rptok"}) {
    train::TokenFile f(kData + split);
    INFO(f.path());
    CHECK(f.info().n_examples >= 100);
    CHECK(f.info().vocab.size() == f.info().vocab_size);
    std::vector<uint64_t> starts;
    for (uint64_t e = 0; e <= f.info().n_examples; ++e) starts.push_back(f.example_start(e));
    const std::vector<int32_t> parent = channel(f, nn::kAstParentChannel), depth = channel(f, nn::kAstDepthChannel);
    CHECK_NOTHROW(nn::check_ast_channels(f.path(), starts, "parent", parent.data(), "depth", depth.data()));
    // Every example starts with the root of its top-level statement; most tokens have a parent.
    int64_t roots = 0;
    for (uint64_t e = 0; e < f.info().n_examples; ++e) CHECK(parent[starts[e]] == 0);
    for (int32_t p : parent) roots += p == 0;
    CHECK(roots < int64_t(parent.size()) / 10);
  }
}

TEST_CASE("data/: a Python AST token file cut inside an example is refused naming the file",
          "[tokens][ast][hostile]") {
  const std::string d = tmp_dir("cut");
  const std::string whole = slurp(kData + "_val.rptok");
  REQUIRE(whole.size() > 1000);
  const std::string cut = d + "/cut.rptok";
  {
    std::ofstream o(cut, std::ios::binary);
    o << whole.substr(0, whole.size() / 2);  // inside the tokens of some example
  }
  try {
    train::TokenFile f(cut);
    FAIL("a cut file opened");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Contains(cut));
  }
  fs::remove_all(d);
}

TEST_CASE("cli: an ast run refuses token files whose trees are broken, naming file, example and channel",
          "[cli][ast][hostile]") {
  const std::string d = tmp_dir("broken");
  // Two examples of 6 tokens: x = f ( a ) and y = ( b ) shapes (parent: tokens back, 0 = root).
  const std::vector<int64_t> toks = {0, 1, 2, 3, 4, 5, 0, 1, 3, 4, 5, 2};
  const std::vector<uint64_t> starts = {0, 6};
  const std::vector<int32_t> parent = {0, 1, 2, 1, 1, 2, 0, 1, 2, 1, 2, 5};
  const std::vector<int32_t> depth = {0, 1, 1, 2, 3, 3, 0, 1, 1, 2, 2, 1};
  const std::vector<train::TokenChannel> ch = {{"parent", train::ChannelScope::Token, -8, 8},
                                               {"depth", train::ChannelScope::Token, 0, 8}};
  auto write = [&](const std::string& name, std::vector<int32_t> p, std::vector<int32_t> dp) {
    std::vector<int64_t> many;
    std::vector<uint64_t> st;
    std::vector<int32_t> pm, dm;
    for (int rep = 0; rep < 40; ++rep) {  // enough tokens for windows of 16
      st.push_back(many.size());
      st.push_back(many.size() + 6);
      many.insert(many.end(), toks.begin(), toks.end());
      pm.insert(pm.end(), p.begin(), p.end());
      dm.insert(dm.end(), dp.begin(), dp.end());
    }
    train::write_token_file(d + "/" + name, 6, many, st, {}, ch, {pm, dm});
  };
  write("good.rptok", parent, depth);
  const std::string base = "train " RELPOS_SOURCE_DIR "/configs/code_ast.yaml --set data.seq_len=16 --set "
                           "data.batch_size=2 --set train.steps=2 --set train.eval_every=2 --set train.eval_batches=1 "
                           "--set train.log_every=1 --set optim.warmup=1 --set train.checkpoint_every=2 --overwrite "
                           "--set output.dir=" + d + "/run --set data.val_path=" + d + "/good.rptok --set data.path=" + d;
  const test::CliRun ok = test::cli_run("--threads 1 " + base + "/good.rptok");
  INFO(ok.out);
  CHECK(ok.code == 0);

  auto p = parent;
  p[9] = 4;  // example 1 (the second of the file), token 3 points 1 token before its example
  write("outside.rptok", p, depth);
  test::CliRun r = test::cli_run("--threads 1 " + base + "/outside.rptok");
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Contains(d + "/outside.rptok: example 1, token 3 (token 9 of the file): channel 'parent' is 4, "
                             "which points 1 tokens before the example's first token"));

  p = parent;
  p[2] = -1;  // token 2 -> token 3 and token 3 -> token 2: a cycle
  write("cycle.rptok", p, depth);
  r = test::cli_run("--threads 1 " + base + "/cycle.rptok");
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Contains(d + "/cycle.rptok: example 0, token 2 (token 2 of the file): channel 'parent' is -1, "
                             "which points forward"));

  auto dp = depth;
  dp[4] = 7;
  write("depth.rptok", parent, dp);
  r = test::cli_run("--threads 1 " + base + "/depth.rptok");
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Contains(d + "/depth.rptok: example 0, token 4 (token 4 of the file): channel 'depth' is 7, but "
                             "channel 'parent' (1) makes it 3"));
  fs::remove_all(d);
}

TEST_CASE("eval subset: targets whose parent lies at least N tokens back inside the window", "[ast][evaluate]") {
  // One window of 6 inputs; the target at t is input token t + 1, whose channel is row t + 1.
  // parent channel of the inputs: 0 1 2 3 4 4  (token t's parent is t - value)
  const Tensor target = Tensor::from_vector(std::vector<int64_t>{10, 11, 12, 13, 14, 15}, {1, 6});
  const Tensor pos = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 4}, {1, 6, 1});
  // min 3: target t = 2 reads row 3 (value 3 <= 3: in), t = 3 row 4 (4 <= 4: in), t = 4 row 5
  // (4 <= 5: in); t = 0, 1 read values 1, 2 (< 3: out); t = 5 has no row (out).
  CHECK(train::subset_targets(target, pos, 0, 3).to_vector<int64_t>() ==
        std::vector<int64_t>{train::kIgnore, train::kIgnore, 12, 13, 14, train::kIgnore});
  // A value past the window's start is out: row 2 holds 5 > 2 (its parent precedes the window).
  const Tensor far = Tensor::from_vector(std::vector<int64_t>{0, 1, 5, 1, 1, 1}, {1, 6, 1});
  CHECK(train::subset_targets(target, far, 0, 2).to_vector<int64_t>() ==
        std::vector<int64_t>(6, train::kIgnore));
  // Targets already ignored stay ignored; the column is chosen among several.
  const Tensor two = Tensor::from_vector(std::vector<int64_t>{9, 0, 9, 1, 9, 2, 9, 3, 9, 4, 9, 4}, {1, 6, 2});
  const Tensor some = Tensor::from_vector(std::vector<int64_t>{10, 11, train::kIgnore, 13, 14, 15}, {1, 6});
  CHECK(train::subset_targets(some, two, 1, 3).to_vector<int64_t>() ==
        std::vector<int64_t>{train::kIgnore, train::kIgnore, train::kIgnore, 13, 14, train::kIgnore});
  CHECK_THROWS_WITH(train::subset_targets(target, two, 2, 3), Contains("position channels [B, L, > 2]"));
}
