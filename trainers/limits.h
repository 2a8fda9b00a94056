// trainers/limits.h — hard caps on sizes taken from user input, checked size arithmetic that
// names the keys behind an overflow, and the up-front memory estimate of a training config.
//
// The caps keep every size product representable (so no int64 overflow can reach a tensor
// shape or an allocation); the estimate then compares what a config would allocate with the
// memory this process may use (available_memory.h: MemAvailable and cgroup limits) before anything is allocated.
// Refusals are ConfigErrors naming the keys that drive the size (exit 2); the memory
// refusal can be overridden (`--ignore-memory-check`), the overflow and cap checks cannot.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "trainers/config.h"

namespace relpos::train {

// Caps on single config values (model.*, data.*). Far above anything a CPU trains.
inline constexpr int64_t kMaxDModel = 1 << 16;
inline constexpr int64_t kMaxLayers = 1 << 10;
inline constexpr int64_t kMaxDff = 1 << 20;
inline constexpr int64_t kMaxLen = 1 << 24;         // model.max_len, data.seq_len
inline constexpr int64_t kMaxBatch = 1 << 24;       // data.batch_size
inline constexpr int64_t kMaxVocab = 1 << 24;       // data.vocab_size
inline constexpr int64_t kMaxRepeat = int64_t(1) << 40;  // train.steps, eval_batches, grad_accum, ...
inline constexpr uint64_t kMaxConfigBytes = 16u << 20;
inline constexpr uint64_t kMaxMetricsBytes = uint64_t(1) << 30;  // metrics.jsonl, sweep index files
// CLI caps (relpos sample --tokens, relpos bias --heads/--lq/--lk/offsets).
inline constexpr int64_t kMaxSampleTokens = 1 << 20;
inline constexpr int64_t kMaxInspectDistances = 1 << 16;  // inspect --distances
inline constexpr int64_t kMaxInspectTokens = 512;         // inspect --text (L x L maps per head and layer)
inline constexpr int64_t kMaxBiasHeads = 256;
inline constexpr int64_t kMaxBiasLen = 4096;
inline constexpr int64_t kMaxBiasCells = 1 << 22;  // heads * lq * lk printed
inline constexpr int64_t kMaxOffset = int64_t(1) << 30;

// The product of (value, key) factors; a ConfigError naming every key when it overflows int64.
int64_t checked_size(std::initializer_list<std::pair<int64_t, const char*>> factors, const std::string& what);

struct MemoryTerm {
  std::string what;   // "parameters", "activations", ...
  int64_t bytes = 0;
  std::string keys;   // the config keys that drive it
};

struct ResourceEstimate {
  int64_t parameters = 0;  // learnable scalars
  std::vector<MemoryTerm> terms;
  int64_t total_bytes = 0;
  std::string str() const;  // "1.2 GiB (parameters 10 MiB, ...)"
};

// Parameters, gradients, optimizer state, saved activations, attention workspace and logits
// of one training step of `cfg` at sequence length seq_len (0: the training length) with a
// vocabulary of `vocab` tokens (text tasks: the data's; 0: cfg.model.vocab). Checked
// arithmetic: an overflow is a ConfigError naming the keys. A coarse upper-side estimate
// (float32, every layer's activations kept for backward), not an exact accounting.
ResourceEstimate estimate_resources(const Config& cfg, int64_t vocab = 0, int64_t seq_len = 0);

// Throws a ConfigError when `device` cannot run here (cuda: a build without CUDA, no usable
// GPU): what `relpos validate` and `relpos train` both say.
void check_device_usable(Device device);

// Throws a ConfigError when the estimate exceeds available_memory(), naming the largest
// terms and their keys, unless `ignore` (then it only returns). `context`: "train", ...
void check_memory(const ResourceEstimate& e, bool ignore, const std::string& context);

}  // namespace relpos::train
