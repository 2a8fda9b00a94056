// trainers/data/data_tasks.h — the data tasks (data.task) and what the rest of relpos needs to know
// about each: one entry per task, the one place a task name is compared
// (tests/trainers/test_data_tasks.cpp greps trainers/ and cli/ for comparisons elsewhere).
// The datasets themselves: text_data.cpp (text), token_data.cpp (tokens; text with SentencePiece
// subwords), tasks.cpp (copy .. addition),
// structured_tasks.cpp (patch_grid, graph).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "trainers/data/data.h"

namespace relpos::train {

struct DataTask {
  std::string name;
  // Consecutive characters of a text file (language modelling): a decoder only; the vocabulary
  // comes from the file; evaluation over consecutive windows of the validation stream
  // (windows, sliding, segments); sampling from a text prompt; Transformer-XL segment memory.
  bool text = false;
  // Reads a text file that data.tokenizer turns into tokens (characters or SentencePiece subwords).
  bool tokenizer = false;
  // Reads token files (docs/data.md): data.val_path may name a separate validation file.
  bool val_file = false;
  // Every input token gets a label (patch_grid, graph): an encoder only; sequences are the input
  // itself (no [BOS x SEP y EOS] layout).
  bool labels_each_token = false;
  // The output has another length than the input (recall, addition): not an encoder.
  bool output_length_differs = false;
  // The sequence is a data.grid_h x data.grid_w patch grid, flattened row-major: data.seq_len is
  // grid_h * grid_w, and it evaluates only at that length.
  bool grid = false;
  // Batches carry an int64 [B, L, L] per-example position index (Batch::position_index: graph
  // shortest-path distances), for the encodings whose PositionFacts::index_task names this task.
  bool position_index = false;
  // The smallest data.vocab_size the task can use, and why (graph: 3 distance classes;
  // addition: 10 digits and '+'); 0: no limit beyond the key's own.
  int64_t min_vocab = 0;
  std::string min_vocab_reason;
  // Synthetic tasks: the length of an example's input x and of its answer y for the length
  // parameter n (tasks.cpp: copy x = y = n; recall x = 2 max(1, n / 2) + 1, y = 1; addition
  // x = 2 n + 1, y = n + 1). Null for text and per-token tasks: one sequence of n tokens.
  int64_t (*input_len)(int64_t n) = nullptr;
  int64_t (*answer_len)(int64_t n) = nullptr;
  std::unique_ptr<Dataset> (*make)(const Config&, const DataContext& ctx) = nullptr;
};

const std::vector<DataTask>& data_tasks();
// The entry of `name`; a ConfigError listing the tasks otherwise.
const DataTask& find_data_task(const std::string& name);
std::vector<std::string> data_task_names();

// The most positions a layer sees for the length parameter seq_len: seq_len for text and per-token
// tasks; for the synthetic tasks (tasks.cpp layouts) x + y + 2 in a decoder ([BOS x SEP y]), x in
// an encoder, max(x, y + 1) in an encoder-decoder (source x, decoder input [BOS y]).
int64_t task_positions(const Config& c, int64_t seq_len);

}  // namespace relpos::train
