// trainers/trainer.h — the training loop behind `relpos train`, and what `relpos eval` and
// `relpos sample` need to reopen a run.
//
// A run directory (output.dir) holds config.yaml (the effective config), metrics.jsonl and
// metrics.csv, and checkpoints/step_NNNNNNNN/ {model.safetensors, optimizer.safetensors,
// trainer_state.json}. trainer_state.json has the step, both RNG states (data order and
// dropout), the skipped-step count, the vocabulary and the config, so `--resume` continues
// bit-exactly: the same losses as an uninterrupted run (same thread count).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/cuda_runtime.h"
#include "nn/models.h"
#include "nn/optim/optimizer.h"
#include "trainers/config.h"
#include "trainers/data/data.h"
#include "trainers/dist/comm.h"

namespace relpos::train {

struct TrainResult {
  std::string run_dir;
  int64_t steps_done = 0;       // last completed step
  int64_t skipped_steps = 0;    // non-finite steps skipped (nan_policy: skip)
  int64_t overflow_steps = 0;   // train.precision fp16: steps skipped for a gradient overflow
  double final_train_loss = 0;  // mean over the last log window
  double final_val_loss = 0;
  int64_t final_val_step = -1;  // step of the evaluation final_val_loss comes from (-1: none ran)
  double seconds = 0;
  std::vector<double> losses;   // training loss of every step run in this process
  // First step whose training loss was non-finite or > 2x the running minimum of the
  // earlier steps' losses (-1: none); also logged to metrics.jsonl as first_divergence_step.
  int64_t first_divergence_step = -1;
  // With TrainOptions::cuda_stats (or RELPOS_CUDA_STATS=1): the host<->device transfers of
  // each step run, from its start to the end of its update (before logging and checkpointing).
  std::vector<cuda::TransferStats> step_transfers;
};

struct TrainOptions {
  std::optional<std::string> resume;  // run dir (latest checkpoint) or a checkpoint dir; the run
                                      // continues in that run's directory
  bool overwrite = false;             // a new run may replace the run files in a non-empty output.dir
  bool ignore_memory_check = false;   // train even when the memory estimate exceeds the available memory (MemAvailable, cgroup limits)
  bool progress_bar = false;          // live bar on a terminal, else log lines
  std::function<void(const std::string&)> log;  // progress / log lines (may be empty)
  // Data-parallel runs: this process's communicator (null: a single process). See
  // data_parallel.h; the `relpos` executable passes an MPI communicator under mpirun.
  Communicator* comm = nullptr;
  // Test hook: called after backward, before the non-finite check (inject a NaN gradient).
  std::function<void(int64_t step, nn::Model&)> after_backward;
  // Debug statistic: count the CUDA transfers of every step (core/cuda_runtime.h), log them
  // ("step N: cuda transfers h2d ...") and return them in TrainResult::step_transfers. Also
  // on when the environment has RELPOS_CUDA_STATS=1.
  bool cuda_stats = false;
};

TrainResult train(const Config& cfg, const TrainOptions& opt = {});

// The optimizer optim.name asks for over m's parameters, in groups by tag: the optim.no_decay
// tags get weight decay 0 (SGD, Adam and AdamW alike).
std::unique_ptr<nn::optim::Optimizer> make_optimizer(const nn::Model& m, const OptimConfig& o);

// The CUDA device a rank trains on with train.device: cuda: its local rank (the rank among
// those on its machine, Communicator::local_rank) modulo the machine's device count, so
// `mpirun -np N` spreads N ranks over the GPUs instead of stacking them on cuda:0. A
// relpos::Error when device_count < 1 or local_rank < 0.
int cuda_device_for_rank(int local_rank, int device_count);

// trainer_state.json of checkpoint `ck`, validated field by field (step, RNG states,
// skipped_steps, vocab, config_yaml) before anything is built or written; errors name the
// file and the key (relpos::Error: a damaged checkpoint is a runtime failure, exit 1).
struct SavedState {
  int64_t step = 0, skipped = 0;
  GeneratorState data_rng, dropout_rng;
  std::vector<std::string> vocab;
  int64_t vocab_size = 0;       // the data's vocabulary size (absent in older checkpoints: 0)
  std::string tokenizer_model;  // a subword run's SentencePiece model (its bytes), else empty
  std::string config_yaml;
  int64_t world_size = 1;  // ranks of the run that wrote it (absent in older checkpoints: 1)
  // train.precision fp16 (absent otherwise): the loss scaler's state, overflow steps so far
  double loss_scale = 0;
  int64_t loss_scale_good_steps = 0, overflow_steps = 0;
};
SavedState parse_state(const nlohmann::json& state, const std::string& ck);
// The config saved in a checkpoint (its errors are relpos::Error naming the checkpoint).
Config saved_config(const SavedState& st, const std::string& ck);

struct EvalResult {
  int64_t seq_len = 0;
  double loss = 0, perplexity = 0, accuracy = 0;  // accuracy: argmax over non-ignored targets
  int64_t tokens = 0;
};

// A trained model reopened from its run directory (latest checkpoint) or a checkpoint dir.
struct LoadedRun {
  Config cfg;
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<Dataset> data;
  int64_t step = 0;
  std::string checkpoint;
};
// val_path: evaluate on this validation file instead of the run's data.val_path (a token file of the
// same vocabulary: `relpos eval --val-path`, a sweep's eval.val_paths).
LoadedRun load_run(const std::string& dir, const std::string& val_path = "");

// Validation metrics over cfg.train.eval_batches batches at seq_len (0: the training length).
EvalResult evaluate(const nn::Model& model, const Dataset& data, const Config& cfg, int64_t seq_len = 0);

struct SampleOptions {
  std::string prompt;
  int64_t tokens = 200;
  double temperature = 1.0;  // 0: greedy
  uint64_t seed = 0;
};
// Decoder models only; decodes with the KV cache. Attention never reaches further back than
// the training length data.seq_len: when the cache is full it is rebuilt from the last half
// window (the usual "crop to block size" of char-level samplers).
std::string sample(const LoadedRun& run, const SampleOptions& opt);

}  // namespace relpos::train
