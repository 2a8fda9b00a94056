// The data tasks' facts live in one table (trainers/data/data_tasks.h): config validation, the
// memory estimate, evaluation, sweeps and the CLI read them. This file checks that no task name is
// compared anywhere else in trainers/ or cli/, and that the facts agree with what the datasets do.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "trainers/config.h"
#include "trainers/data/data_tasks.h"
#include "trainers/data/token_file.h"
#include "../helpers.h"

using namespace relpos;
namespace fs = std::filesystem;

TEST_CASE("data tasks: no task name is compared outside the task table and the tasks' own datasets",
          "[data][structure]") {
  std::string names;
  for (const auto& t : train::data_tasks()) names += (names.empty() ? "" : "|") + t.name;
  const std::regex compare("task\\s*(==|!=)\\s*\"(" + names + ")\"|\"(" + names + ")\"\\s*(==|!=)\\s*\\w*task");
  std::vector<std::string> found;
  for (const char* top : test::kLayers) {
    for (const auto& e : fs::recursive_directory_iterator(fs::path(RELPOS_SOURCE_DIR) / top)) {
      const fs::path& p = e.path();
      if (!e.is_regular_file() || (p.extension() != ".cpp" && p.extension() != ".h")) continue;
      // the table, and the implementations of the synthetic tasks (they generate per task)
      const std::string f = p.filename().string();
      if (f == "data_tasks.cpp" || f == "tasks.cpp" || f == "structured_tasks.cpp") continue;
      std::ifstream in(p);
      std::string line;
      for (int n = 1; std::getline(in, line); ++n)
        if (std::regex_search(line, compare))
          found.push_back(fs::relative(p, RELPOS_SOURCE_DIR).string() + ":" + std::to_string(n) + ": " + line);
    }
  }
  std::string all;
  for (const auto& l : found) all += l + "\n";
  INFO("read the task's facts (find_data_task, trainers/data/data_tasks.h) instead of comparing its name:\n" << all);
  CHECK(found.empty());
}

namespace {
// The data file of a task: the bundled text, or for token-file tasks a small token file (4
// examples of 40 tokens over 12 ids, a label per example).
std::string data_path(const train::DataTask& t) {
  if (!t.val_file) return RELPOS_SOURCE_DIR "/data/tinyshakespeare.txt";
  const std::string p = (fs::temp_directory_path() / "relpos_data_tasks.rptok").string();
  std::vector<int64_t> toks;
  for (int i = 0; i < 160; ++i) toks.push_back(i % 12);
  train::write_token_file(p, 12, toks, {0, 40, 80, 120}, {}, {{"label", train::ChannelScope::Example, 0, 11}},
                          {{3, 1, 4, 1}});
  return p;
}

train::Config task_config(const train::DataTask& t, const std::string& kind, int64_t vocab = 12) {
  return train::parse_config("model: {kind: " + kind + ", d_model: 16, n_heads: 2, max_len: 64}\ndata: {task: " +
                                 t.name + ", seq_len: 8, vocab_size: " + std::to_string(vocab) + ", path: " +
                                 data_path(t) + "}\n",
                             "test");
}
}  // namespace

TEST_CASE("data tasks: every task validates and builds, and its facts agree with its batches", "[data]") {
  for (const auto& t : train::data_tasks()) {
    // every model kind the task allows
    std::vector<std::string> kinds{t.text ? "decoder" : t.labels_each_token ? "encoder" : "decoder"};
    if (!t.text && !t.labels_each_token) kinds.push_back("encoder_decoder");
    if (!t.text && !t.labels_each_token && !t.output_length_differs) kinds.push_back("encoder");
    for (const auto& kind : kinds) {
      INFO(t.name << " " << kind);
      const train::Config c = task_config(t, kind);
      auto data = train::make_dataset(c);
      Generator g(1);
      train::Batch b = data->train_batch(g);
      // task_positions is exactly the longest sequence a layer sees (seq_len 8, min_len 0: every example has n = 8)
      int64_t longest = b.input.size(1);
      if (b.dec_input.defined()) longest = std::max(longest, b.dec_input.size(1));
      CHECK(longest == train::task_positions(c, c.data.seq_len));
      CHECK(b.position_index.defined() == t.position_index);
      CHECK(data->val_stream().empty() == !t.text);
    }
    // below the task's smallest vocabulary: a config error naming data.task and the reason
    if (t.min_vocab > 2)
      CHECK_THROWS_WITH(task_config(t, kinds[0], t.min_vocab - 1),
                        Catch::Contains("data.task '" + t.name + "' needs data.vocab_size >= " +
                                        std::to_string(t.min_vocab)) &&
                            Catch::Contains(t.min_vocab_reason));
  }
  CHECK_THROWS_WITH(train::find_data_task("copyy"), Catch::Contains("data.task 'copyy'") && Catch::Contains("graph"));
}

TEST_CASE("data tasks: a per-token task needs data.seq_len positions, not the synthetic layout's 2 L + 2", "[data]") {
  // graph, seq_len 20, learned absolute positions with max_len 24: 20 positions fit (the check
  // used to demand 2 * 20 + 2 = 42 for every task but text)
  CHECK_NOTHROW(train::parse_config("model: {kind: encoder, d_model: 16, n_heads: 2, max_len: 24, position: {type: "
                                    "learned}}\ndata: {task: graph, seq_len: 20, vocab_size: 6}\n",
                                    "test"));
  CHECK_THROWS_WITH(train::parse_config("model: {d_model: 16, n_heads: 2, max_len: 24, position: {type: learned}}\n"
                                        "data: {task: copy, seq_len: 20}\n",
                                        "test"),
                    Catch::Contains("needs 42 positions"));
  // addition in a decoder: [BOS a '+' b SEP sum] = (2 * 8 + 1) + (8 + 1) + 2 = 28 positions (the check
  // used to ask for 2 * 8 + 2 = 18, and training then failed past max_len)
  CHECK_THROWS_WITH(train::parse_config("model: {d_model: 16, n_heads: 2, max_len: 24, position: {type: learned}}\n"
                                        "data: {task: addition, seq_len: 8}\n",
                                        "test"),
                    Catch::Contains("needs 28 positions"));
}
