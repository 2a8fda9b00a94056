// trainers/data/data.h — datasets behind one interface: character-level text and the synthetic
// tasks (tasks.cpp). A Batch holds int64 tensors; targets use ignore_index (-100) where no
// loss is taken (prompt tokens, padding).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "nn/models.h"
#include "trainers/config.h"

namespace relpos::train {

inline constexpr int64_t kIgnore = -100;

struct Batch {
  Tensor input;      // [B, L]  decoder/encoder input, or encoder-decoder source
  Tensor target;     // [B, L'] labels (kIgnore = no loss)
  Tensor dec_input;  // [B, L'] encoder-decoder decoder input (BOS + target), else undefined
  Tensor padding;    // [B, L]  1 = padding (encoder inputs / sources), or undefined
  Tensor position_index;  // [B, L, L] int64 per-example structure (graph task: shortest-path
                          // distances for graph_spd), or undefined
  Tensor positions;  // [B, L, P] int64 per-token position channels of the input tokens
                     // (data.position_channels; padding tokens 0), or undefined

  // What the model reads of it (nn::Model::logits).
  nn::ModelInput model_input() const { return {input, dec_input, padding, position_index, positions}; }
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t vocab_size() const = 0;
  // A training batch drawn with gen (the data position is gen's state).
  virtual Batch train_batch(Generator& gen) const = 0;
  // The i-th validation batch, deterministic; seq_len may differ from training's
  // (length extrapolation).
  virtual Batch val_batch(int64_t i, int64_t seq_len) const = 0;
  // Tokens <-> text, for sampling (text) and for showing examples (synthetic).
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  // The token a sample without a prompt starts from (text: the first vocabulary entry; subwords:
  // the newline piece).
  virtual int64_t start_token() const { return 0; }
  // Vocabulary to save with a run (text: the characters), empty for synthetic tasks.
  virtual std::vector<std::string> vocabulary() const { return {}; }
  // A subword tokenizer to save with a run (the SentencePiece model's bytes), empty for none; and
  // what made it (library version and training options), for run records.
  virtual std::string tokenizer_model() const { return {}; }
  virtual std::string tokenizer_info() const { return {}; }
  // The validation split as one token stream (text: every character id in order), for
  // evaluation over consecutive windows (`relpos eval --mode windows|sliding`); empty for
  // synthetic tasks, whose examples are independent.
  virtual std::vector<int64_t> val_stream() const { return {}; }
  // The training split as one token stream (Transformer-XL segment training); empty if none.
  virtual std::vector<int64_t> train_stream() const { return {}; }
};

// What a run or checkpoint adds to cfg.data when a dataset is rebuilt: `vocab` (from a checkpoint)
// fixes a text vocabulary; `vocab_size` a token file's when the file is not at hand (sampling);
// `tokenizer_model` is a checkpoint's SentencePiece model (its bytes); `run_dir` is where the
// encoded tokens of a subword run are cached (<run_dir>/data/), "" for none.
struct DataContext {
  std::vector<std::string> vocab;
  int64_t vocab_size = 0;
  std::string tokenizer_model;
  std::string run_dir;
};

// Builds the dataset of cfg.data. For text, `vocab` (from a checkpoint) fixes the
// vocabulary; otherwise it is made from the file.
std::unique_ptr<Dataset> make_dataset(const Config& cfg, const std::vector<std::string>& vocab = {});
std::unique_ptr<Dataset> make_dataset(const Config& cfg, const DataContext& ctx);
// The vocabulary size the data of `cfg` gives a model, without building the dataset where it can
// (`relpos validate`): the characters of a text file, a tokenizer's size, a token file's header.
int64_t data_vocab_size(const Config& cfg);

// UTF-8 -> code points, as views into `bytes`; throws (ConfigError) naming `source` ("data file 'x'") and the
// byte offset of invalid input (strict UTF-8: no overlong forms, surrogates or code points above U+10FFFF).
std::vector<std::string_view> utf8_char_views(std::string_view bytes, const std::string& source);
// The same, copied out.
std::vector<std::string> utf8_chars(const std::string& bytes, const std::string& source);

// The distinct characters, sorted (a text file's vocabulary).
std::vector<std::string> distinct_chars(const std::vector<std::string_view>& chars);

// The bytes of a text data file. A missing, unreadable or empty file, a directory, or a file over
// kMaxDataFileBytes is a ConfigError naming data.path and the file.
inline constexpr uint64_t kMaxDataFileBytes = uint64_t(1) << 30;
std::string read_text_file(const std::string& path);

}  // namespace relpos::train
