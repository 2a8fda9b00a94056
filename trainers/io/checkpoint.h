// trainers/io/checkpoint.h — training checkpoints on disk. A checkpoint of step S of a run is
// the directory <run_dir>/checkpoints/step_<S, 8 digits zero-padded>/ holding
//   model.safetensors      the model's state_dict, in the order given
//   optimizer.safetensors  the optimizer's state_dict (int64 0-d step counters included)
//   trainer_state.json     whatever the trainer needs besides tensors (step, RNG states,
//                          data position, config text, ...), as the caller's JSON
// Both safetensors files carry the metadata {"format": "relpos-checkpoint", "step": "S"}.
//
// Saving is atomic: everything is written into the sibling <checkpoints>/.tmp-step_<S>/,
// each file fsynced, the directory fsynced, then renamed into place (an existing step_<S>
// is swapped out atomically with renameat2(RENAME_EXCHANGE) and removed). A crash or an
// error at any point leaves either no step_<S> or a complete one, and never touches other
// checkpoints; a failed save removes its temporary directory, and any .tmp-* left by a
// crash is ignored by latest_checkpoint / list_checkpoints and removed by the next save.
// One process saves into a run directory at a time.
//
// Pruning (keep_last > 0) happens after a successful save: of the checkpoints with a step
// <= the one just saved, the keep_last with the highest steps are kept (so the new one
// always is) and the others are deleted. Checkpoints with a higher step (left by an
// abandoned run after resuming from an earlier step) are never pruned. keep_last <= 0
// keeps everything. A pruned checkpoint is first renamed to .tmp-prune-step_<S> and then
// deleted, so a crash while deleting never leaves a partial step_<S>.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainers/io/safetensors.h"

namespace relpos {

struct Checkpoint {
  NamedTensors model;
  NamedTensors optimizer;
  nlohmann::json state;
};

inline constexpr const char* kModelFile = "model.safetensors";
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";
inline constexpr const char* kTrainerStateFile = "trainer_state.json";

// "<run_dir>/checkpoints/step_00001234"
std::string checkpoint_dir(const std::string& run_dir, int64_t step);

// Writes the checkpoint of `step` (>= 0) atomically, prunes, returns its directory.
// Errors (relpos::Error) name the path; after an error the run's checkpoints are unchanged.
std::string save_checkpoint(const std::string& run_dir, int64_t step, const Checkpoint& ckpt,
                            int keep_last);

// Reads a checkpoint directory; errors name the directory or file and what is wrong
// (missing file, corrupted safetensors, invalid JSON, non-finite values: a checkpoint holds
// only finite state, so save_checkpoint refuses NaN/Inf and loading rejects them).
Checkpoint load_checkpoint(const std::string& dir);

// The parts separately, for a caller that validates the state before reading tensors.
// trainer_state.json alone (must be a JSON object):
nlohmann::json load_checkpoint_state(const std::string& dir);
// The two safetensors files, checked against what the caller will load them into, from the
// headers before any data is read: model.safetensors must hold exactly `model_like`'s names,
// dtypes and shapes; optimizer.safetensors may declare at most optimizer_max_bytes of data.
void load_checkpoint_tensors(const std::string& dir, const NamedTensors& model_like,
                             uint64_t optimizer_max_bytes, Checkpoint& out);

// The checkpoints of a run — directories named step_<digits> (a directory gets that name
// only once complete) — by increasing step; empty when <run_dir>/checkpoints does not exist.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& run_dir);

// The directory of the highest step, if any.
std::optional<std::string> latest_checkpoint(const std::string& run_dir);

}  // namespace relpos
