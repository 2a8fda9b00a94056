// trainers/dist/data_parallel.h — what `relpos train` does differently as one of N ranks.
//
// Every rank builds the same model from the same seed and draws the same *global* batch of
// N x data.batch_size rows (drawing is cheap next to a step); rank r keeps rows
// [r B, (r+1) B). Each rank weights its loss by its share of the global batch's target tokens,
// so after gradients are summed (Communicator::allreduce_sum: fixed order, same bits on every
// rank) the update is the one a single process would make on the whole global batch —
// dropout included, because the dropout generator is sharded (Generator::set_shard). Rank 0
// alone writes the run directory; every decision (NaN policy, clipping, stopping) is taken
// from reduced values that are identical on all ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "nn/models.h"
#include "trainers/dist/comm.h"
#include "trainers/config.h"
#include "trainers/data/data.h"

namespace relpos::train {

// Test hook, from the environment variable RELPOS_FAULT="KIND:RANK:STEP" (KIND: hang, exit,
// diverge): at the start of STEP the rank RANK sleeps forever / exits with status 3 / (after
// the update) perturbs one parameter. Used by the failure tests of data-parallel training.
struct Fault {
  std::string kind;  // "" = none
  int rank = -1;
  int64_t step = -1;
};
Fault fault_from_env();

class DataParallel {
 public:
  DataParallel(Communicator& comm, const Config& cfg);

  int rank() const { return comm_.rank(); }
  int world() const { return comm_.size(); }
  int local_rank() const { return comm_.local_rank(); }
  bool active() const { return comm_.size() > 1; }
  bool is_root() const { return comm_.rank() == 0; }
  Communicator& comm() { return comm_; }
  const Communicator& comm() const { return comm_; }

  // The config the datasets are built from: data.batch_size = world x the per-rank batch
  // (a ConfigError naming data.batch_size when that overflows).
  Config global_data_config(const Config& cfg) const;
  // This rank's rows of a global batch (dim 0 of every tensor).
  Batch shard(const Batch& global) const;
  // Targets that carry a loss (!= ignore_index) in a host batch.
  static int64_t count_targets(const Batch& b);

  // Every rank runs the same config and data (hash of the effective config and vocabulary);
  // a mismatch is a ConfigError naming the ranks that differ from rank 0. A collective, so it
  // also orders "every rank validated" before "rank 0 writes the run directory".
  void check_same_config(const Config& cfg, const std::vector<std::string>& vocab);
  // All ranks reached `step` (bounded wait: train.dist_timeout seconds).
  void rendezvous(int64_t seq, const std::string& what);
  // Sum the gradients of `params` over ranks (in place) and sum `scalars` over ranks (rank order).
  void sum_gradients(const std::vector<Variable>& params, std::vector<double>& scalars);
  // Every train.check_every steps (and at step 0): the parameters' bits agree on all ranks,
  // else an Error naming the step and the ranks that diverged from rank 0.
  void check_parameters(const nn::Model& model, int64_t step, bool force = false);

  // A non-root rank whose job rank 0 is about to stop (a collective decision, e.g. the NaN
  // abort): waits to be stopped by rank 0's report, or fails itself after train.dist_timeout.
  [[noreturn]] void await_root_abort() const;

  void inject_fault_before(int64_t step) const;
  void inject_fault_in_step(int64_t step) const;  // test hook: RELPOS_FAULT=stall:RANK:STEP
  void inject_fault_after(int64_t step, nn::Model& model) const;

 private:
  Communicator& comm_;
  double timeout_s_;
  int64_t check_every_;
  Fault fault_;
};

}  // namespace relpos::train
