// trainers/config.h — the YAML training config: typed sections and their defaults (the member
// initialisers below are the defaults; nothing else repeats them).
// Each section's keys — name, type, range, meaning, how it is read — are one table in
// config.cpp (`model_keys()`, `data_keys()`, ...): parsing, the "did you mean" of unknown
// keys and the key tables of docs/config.md (`relpos list --config --markdown`) derive from
// it. Loading checks everything before any work: unknown keys, wrong types and out-of-range
// values are ConfigErrors naming file:line:column, the key and what was expected;
// `--set a.b=v` overrides go through the same checks (named "--set a.b=v"). Closed choices
// are enums whose names are EnumTables (core/enum_names.h) beside each enum.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "nn/models.h"
#include "nn/optim/optimizer.h"
#include "nn/optim/schedule.h"

namespace YAML {
class Node;
}

namespace relpos::train {

// data.tokenizer: how `task: text` turns its file into tokens — characters, or SentencePiece
// subwords (docs/data.md; built with Debian's libsentencepiece-dev).
enum class TokenizerType { Char, SentencePiece };
enum class SubwordModelType { Bpe, Unigram };

struct TokenizerConfig {
  TokenizerType type = TokenizerType::Char;
  int64_t vocab_size = 2048;                     // sentencepiece: pieces of a trained model
  SubwordModelType model_type = SubwordModelType::Unigram;
  std::string model;                             // sentencepiece: a model file to load ("" = train one)
  bool operator==(const TokenizerConfig&) const = default;
};

struct DataConfig {
  std::string task = "text";  // a name of the data-task registry (trainers/data/data_tasks.h)
  std::string path = "data/tinyshakespeare.txt";
  double val_fraction = 0.1;
  int64_t seq_len = 128;      // text: context length; synthetic: sequence length
  int64_t batch_size = 16;
  int64_t vocab_size = 16;    // synthetic tasks: number of symbols
  int64_t min_len = 0;        // synthetic tasks: lengths drawn from [min_len, seq_len] (0: = seq_len)
  int64_t grid_h = 4, grid_w = 4;  // patch_grid: the patch grid (seq_len = grid_h * grid_w)
  double edge_prob = 0.2;     // graph: probability of each undirected edge
  std::string val_path;       // tokens: a separate validation file ("" = split data.path by example)
  int64_t shard_vocab = 0;    // tokens: an llm.c shard's vocabulary size (0 = by its magic)
  // tokens, token_labels: token-scope channels of the token file copied into every batch
  // (Batch::positions, column p = position_channels[p]) for encodings that read positions from
  // data (2D coordinates, onset times, tree structure); the model gets the names too
  // (ModelConfig::position_channels).
  std::vector<std::string> position_channels;
  TokenizerConfig tokenizer;
  bool operator==(const DataConfig&) const = default;
};

struct OptimConfig {
  nn::optim::OptimizerKind name = nn::optim::OptimizerKind::AdamW;
  double lr = 3e-4;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double momentum = 0.9;       // sgd
  double weight_decay = 0.0;
  std::vector<std::string> no_decay = {"position", "norms_biases"};
  nn::optim::LrSchedule schedule = nn::optim::LrSchedule::WarmupCosine;
  int64_t warmup = 0;
  double min_lr_ratio = 0.1;
  double clip_grad_norm = 1.0;  // 0 = no clipping
  double z_loss = 0.0;          // coefficient of mean(logsumexp(logits)^2) (0 = off)
  bool operator==(const OptimConfig&) const = default;
};

// train.nan_policy: on a non-finite loss or gradient, stop or skip the update.
enum class NanPolicy { Abort, Skip };

struct TrainLoopConfig {
  int64_t steps = 1000;
  int64_t grad_accum = 1;
  int64_t eval_every = 200;
  int64_t eval_batches = 20;
  int64_t log_every = 10;
  double logit_threshold = 50.0;  // train.logit_threshold: the attn_rows_above_threshold monitor
  int64_t checkpoint_every = 0;  // 0 = only at the end
  int64_t keep_last = 2;
  uint64_t seed = 1337;
  Device device = Device::CPU;
  bool allow_tf32 = false;       // cuda: TF32 tensor cores for float32 GEMMs
  int64_t threads = 0;           // 0 = OMP_NUM_THREADS / all cores
  NanPolicy nan_policy = NanPolicy::Abort;
  Precision precision = Precision::FP32;  // train.precision (autograd/autocast.h)
  double loss_scale_init = 65536.0;       // fp16: the first loss scale (PyTorch's GradScaler: 2^16)
  int64_t loss_scale_interval = 2000;     // fp16: finite steps before the scale doubles
  // Data-parallel runs (mpirun -np N relpos train): parameter checksum across ranks every
  // check_every steps (0 = only at the start), and how long a rank waits for the others at a
  // step before the job stops naming the missing ranks.
  int64_t check_every = 100;
  double dist_timeout = 300.0;   // seconds
  bool operator==(const TrainLoopConfig&) const = default;
};

struct Config {
  nn::ModelConfig model;
  DataConfig data;
  OptimConfig optim;
  TrainLoopConfig train;
  std::string output_dir = "runs/default";
  std::string source;  // file name (for messages)
  std::string yaml;    // the effective YAML (with overrides), saved with each run
};

// The documentation of each key of a config section, as the tables of docs/config.md show it.
struct ConfigKeyDoc {
  std::string key, type, default_value, meaning;
};
const std::vector<std::string>& config_sections();                      // model, data, optim, train, output
std::vector<ConfigKeyDoc> config_key_docs(const std::string& section);  // Error: not a section
std::string config_keys_markdown(const std::string& section);           // its table in docs/config.md

// Parse and validate. `overrides` are "a.b=value" strings (value parsed as YAML).
// model.vocab is left 0 for text tasks (known once the data is read).
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// A decoder trained on a text task: it can sample, be evaluated on consecutive windows and
// memory segments, and show attention maps of a text.
bool text_decoder(const Config& c);
Config parse_config(const std::string& yaml_text, const std::string& source,
                    const std::vector<std::string>& overrides = {});

// The one YAML document of a config or sweep spec (a second document is an error naming its
// line; invalid YAML names line and column).
YAML::Node load_one_document(const std::string& yaml_text, const std::string& source);
// A sequence length the model's positions must serve (training or evaluation): learned
// absolute tables end at model.max_len (ConfigError naming `what`, e.g. "file: eval.lengths").
void check_positions(const Config& c, int64_t seq_len, const std::string& what);
// Refuses a document with more than kMaxYamlNodes nodes once aliases are expanded (ConfigError).
inline constexpr int64_t kMaxYamlNodes = int64_t(1) << 20;
void check_yaml_size(const YAML::Node& root, const std::string& source);

}  // namespace relpos::train

template <>
struct relpos::EnumTable<relpos::train::TokenizerType> {
  static constexpr EnumName<train::TokenizerType> items[] = {{train::TokenizerType::Char, "char"},
                                                             {train::TokenizerType::SentencePiece, "sentencepiece"}};
};
template <>
struct relpos::EnumTable<relpos::train::SubwordModelType> {
  static constexpr EnumName<train::SubwordModelType> items[] = {{train::SubwordModelType::Bpe, "bpe"},
                                                                {train::SubwordModelType::Unigram, "unigram"}};
};
template <>
struct relpos::EnumTable<relpos::train::NanPolicy> {
  static constexpr EnumName<train::NanPolicy> items[] = {{train::NanPolicy::Abort, "abort"},
                                                         {train::NanPolicy::Skip, "skip"}};
};
