// trainers/dist/comm.h — the processes of a data-parallel run and the few collectives training needs.
//
// A Communicator is one rank of `size()` processes. Training uses four things: a deterministic
// element-wise sum (gradients), an all-gather of small values (losses, config and parameter
// checksums), a rendezvous with a deadline that names the ranks that did not arrive (so a hung
// or dead rank stops the job instead of hanging it), and abort. `SingleProcess` is the
// one-rank communicator; trainers/dist/mpi/comm_mpi.h is the MPI one, used by the `relpos`
// executable when it is started by mpirun (NCCL for device buffers is planned: today a CUDA
// run's gradients go through the host).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace relpos::train {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This process's rank among the ranks on its machine (0 .. ranks per node - 1): which GPU
  // it trains on (cuda_device_for_rank, trainer.h).
  virtual int local_rank() const = 0;
  virtual std::string backend() const = 0;  // "single", "mpi"

  // x <- sum over ranks of x, element-wise, with the same bits on every rank whatever the
  // timing: each rank reduces one contiguous chunk, adding the ranks' contributions in rank
  // order 0..N-1 in double, then every rank gathers every chunk (reduce-scatter + all-gather:
  // 2 (N-1)/N x 4 bytes per element sent by each rank, the volume of a ring all-reduce).
  // With a deadline: a rank that does not arrive within timeout_s seconds (stopped, hung,
  // dead) stops the whole job; rank 0's error names the ranks that never reached `what`.
  virtual void allreduce_sum(float* x, int64_t n, double timeout_s, const std::string& what) = 0;
  // Every rank's `v` (all the same length), rank-major: result[r * v.size() + i].
  virtual std::vector<double> allgather(const std::vector<double>& v) = 0;
  virtual std::vector<uint64_t> allgather(uint64_t v) = 0;
  // Every rank calls rendezvous(tag) in the same order; returns when all have, or — after
  // timeout_s seconds — stops the whole job with an error naming the ranks that did not
  // arrive at `what`. Rank 0 waits for the others, the others wait for rank 0's answer.
  virtual void rendezvous(int64_t tag, double timeout_s, const std::string& what) = 0;
  // Stops every rank of the job with exit status `code` (after `message` went to stderr).
  [[noreturn]] virtual void abort(int code, const std::string& message) = 0;
};

// One process: every collective is the identity.
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  std::string backend() const override { return "single"; }
  void allreduce_sum(float*, int64_t, double, const std::string&) override {}
  std::vector<double> allgather(const std::vector<double>& v) override { return v; }
  std::vector<uint64_t> allgather(uint64_t v) override { return {v}; }
  void rendezvous(int64_t, double, const std::string&) override {}
  [[noreturn]] void abort(int code, const std::string& message) override;
};

// Number of processes the launcher started, from its environment (OpenMPI's
// OMPI_COMM_WORLD_SIZE, PMI_SIZE of MPICH / Slurm's PMI, PMIX_SIZE); 1 when not launched so.
int launcher_world_size();

}  // namespace relpos::train
