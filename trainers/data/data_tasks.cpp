// trainers/data/data_tasks.cpp — the data task table (see data_tasks.h).
#include "trainers/data/data_tasks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace relpos::train {

std::unique_ptr<Dataset> make_text_dataset(const Config& cfg, const DataContext& ctx);
std::unique_ptr<Dataset> make_token_dataset(const Config& cfg, const DataContext& ctx);
std::unique_ptr<Dataset> make_token_label_dataset(const Config& cfg, const DataContext& ctx);
std::unique_ptr<Dataset> make_synthetic_dataset(const Config& cfg);
std::unique_ptr<Dataset> make_structured_dataset(const Config& cfg);

namespace {

std::unique_ptr<Dataset> synthetic(const Config& c, const DataContext&) { return make_synthetic_dataset(c); }
std::unique_ptr<Dataset> structured(const Config& c, const DataContext&) { return make_structured_dataset(c); }

int64_t same(int64_t n) { return n; }
int64_t one(int64_t) { return 1; }
int64_t recall_input(int64_t n) { return 2 * std::max<int64_t>(1, n / 2) + 1; }  // k1 v1 .. kp vp q
int64_t addition_input(int64_t n) { return 2 * n + 1; }                         // a '+' b
int64_t addition_answer(int64_t n) { return n + 1; }                           // the digits of a + b

}  // namespace

const std::vector<DataTask>& data_tasks() {
  static const std::vector<DataTask> tasks = {
      {.name = "text", .text = true, .tokenizer = true, .make = make_text_dataset},
      {.name = "tokens", .text = true, .val_file = true, .make = make_token_dataset},
      {.name = "copy", .input_len = same, .answer_len = same, .make = synthetic},
      {.name = "reverse", .input_len = same, .answer_len = same, .make = synthetic},
      {.name = "sort", .input_len = same, .answer_len = same, .make = synthetic},
      {.name = "recall", .output_length_differs = true, .input_len = recall_input, .answer_len = one,
       .make = synthetic},
      {.name = "addition", .output_length_differs = true, .min_vocab = 11, .min_vocab_reason = "10 digits and '+'",
       .input_len = addition_input, .answer_len = addition_answer, .make = synthetic},
      {.name = "patch_grid", .labels_each_token = true, .grid = true, .make = structured},
      {.name = "token_labels", .val_file = true, .labels_each_token = true, .make = make_token_label_dataset},
      {.name = "graph", .labels_each_token = true, .position_index = true, .min_vocab = 3,
       .min_vocab_reason = "distance classes", .make = structured},
  };
  return tasks;
}

std::vector<std::string> data_task_names() {
  std::vector<std::string> out;
  for (const auto& t : data_tasks()) out.push_back(t.name);
  return out;
}

const DataTask& find_data_task(const std::string& name) {
  for (const auto& t : data_tasks())
    if (t.name == name) return t;
  fail_config("data.task '{}': expected one of {}", name, fmt::join(data_task_names(), ", "));
}

int64_t task_positions(const Config& c, int64_t seq_len) {
  const DataTask& t = find_data_task(c.data.task);
  if (!t.input_len) return seq_len;
  const int64_t x = t.input_len(seq_len), y = t.answer_len(seq_len);
  if (c.model.kind == nn::ModelKind::Encoder) return x;
  if (c.model.kind == nn::ModelKind::EncoderDecoder) return std::max(x, y + 1);
  return x + y + 2;
}

std::unique_ptr<Dataset> make_dataset(const Config& cfg, const std::vector<std::string>& vocab) {
  return make_dataset(cfg, DataContext{.vocab = vocab});
}

std::unique_ptr<Dataset> make_dataset(const Config& cfg, const DataContext& ctx) {
  return find_data_task(cfg.data.task).make(cfg, ctx);
}

}  // namespace relpos::train
