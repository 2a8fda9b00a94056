// trainers/dist/mpi/comm_mpi.cpp — see comm_mpi.h.
#include "trainers/dist/mpi/comm_mpi.h"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/error.h"

namespace relpos::train {
namespace {

constexpr int kTagArrive = 7101, kTagGo = 7102, kTagCollective = 7103;
// Non-root ranks wait this much longer than rank 0 before giving up on a collective, so that
// rank 0 (which can name the silent ranks) reports first.
constexpr double kRootFirst = 2.0;


void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, buf, &len);
  throw Error(fmt::format("MPI: {} failed: {}", what, std::string_view(buf, size_t(len))));
}

// A deadline for non-blocking MPI requests: wait() polls MPI_Test until the request completes
// (true) or the deadline passes (false).
class Deadline {
 public:
  Deadline(double timeout_s, double extra_s)
      : end_(std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                      std::chrono::duration<double>(timeout_s + extra_s))) {}
  bool wait(MPI_Request* req) const {
    for (int spins = 0;; ++spins) {
      int done = 0;
      check(MPI_Test(req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return true;
      if (std::chrono::steady_clock::now() > end_) return false;
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));  // spin first: most complete fast
    }
  }

 private:
  std::chrono::steady_clock::time_point end_;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      std::atexit([] {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin) MPI_Finalize();
      });
    }
    // Errors come back as codes (and become relpos::Error) instead of aborting inside MPI.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // The local rank (OpenMPI's OMPI_COMM_WORLD_LOCAL_RANK, from any MPI-3 library): the
    // rank within the ranks that share this machine's memory.
    MPI_Comm node = MPI_COMM_NULL;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
          "MPI_Comm_split_type (local rank)");
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_free(&node);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string backend() const override { return "mpi"; }

  void allreduce_sum(float* x, int64_t n, double timeout_s, const std::string& what) override {
    if (size_ == 1 || n == 0) return;
    // Chunk r of the buffer is reduced by rank r: counts/displacements in elements.
    const int64_t N = size_;
    std::vector<int> cnt(static_cast<size_t>(N)), dsp(static_cast<size_t>(N));
    for (int64_t r = 0; r < N; ++r) {
      const int64_t lo = n * r / N, hi = n * (r + 1) / N;
      RELPOS_CHECK(hi - lo < INT32_MAX, "allreduce_sum: a chunk of {} elements exceeds MPI's int count", hi - lo);
      cnt[size_t(r)] = int(hi - lo);
      dsp[size_t(r)] = int(lo);  // n < N * INT32_MAX is checked by the caller's size limits
    }
    const int mine = cnt[size_t(rank_)];
    // Arrival notes: every rank tells rank 0 it entered this collective (sequence number), so a
    // timeout can name the ranks that never did. Non-blocking collectives polled against the
    // deadline: a stopped rank cannot hold the others forever.
    const int64_t seq = ++collective_seq_;
    Deadline dl(timeout_s, rank_ == 0 ? 0.0 : kRootFirst);
    std::vector<int64_t> arrived(size_t(N), -1);
    std::vector<MPI_Request> notes;
    if (rank_ == 0) {
      notes.resize(size_t(N - 1));
      for (int r = 1; r < size_; ++r)
        check(MPI_Irecv(&arrived[size_t(r)], 1, MPI_INT64_T, r, kTagCollective, MPI_COMM_WORLD, &notes[size_t(r - 1)]),
              "MPI_Irecv");
    } else {
      notes.resize(1);
      check(MPI_Isend(&seq, 1, MPI_INT64_T, 0, kTagCollective, MPI_COMM_WORLD, &notes[0]), "MPI_Isend");
    }
    auto on_timeout = [&](const char* phase) {
      if (rank_ != 0)
        abort(1, fmt::format("error (rank {}): {} ({}) did not complete within {} s: rank 0 or another rank is "
                             "stopped, hung or dead (train.dist_timeout); stopping all {} ranks", rank_, what, phase,
                             timeout_s, size_));
      std::string silent;
      for (int r = 1; r < size_; ++r) {
        int done = 0;
        MPI_Test(&notes[size_t(r - 1)], &done, MPI_STATUS_IGNORE);
        if (!done) silent += fmt::format("{}{}", silent.empty() ? "" : ", ", r);
      }
      abort(1, silent.empty()
                   ? fmt::format("error: {} ({}) did not complete within {} s although every rank reached it (a rank "
                                 "stopped inside it; train.dist_timeout); stopping all {} ranks", what, phase,
                                 timeout_s, size_)
                   : fmt::format("error: rank {} did not reach {} within {} s (stopped, hung or dead; "
                                 "train.dist_timeout); stopping all {} ranks", silent, what, timeout_s, size_));
    };
    // Every rank's copy of my chunk, rank-major.
    std::vector<float> recv(size_t(mine) * size_t(N));
    std::vector<int> rcnt(static_cast<size_t>(N), mine), rdsp(static_cast<size_t>(N));
    for (int64_t r = 0; r < N; ++r) rdsp[size_t(r)] = int(r * mine);
    MPI_Request req;
    check(MPI_Ialltoallv(x, cnt.data(), dsp.data(), MPI_FLOAT, recv.data(), rcnt.data(), rdsp.data(), MPI_FLOAT,
                         MPI_COMM_WORLD, &req),
          "MPI_Ialltoallv (gradient reduce-scatter)");
    if (!dl.wait(&req)) on_timeout("reduce-scatter");
    std::vector<float> red(static_cast<size_t>(mine));
    for (int i = 0; i < mine; ++i) {
      double acc = 0;
      for (int64_t r = 0; r < N; ++r) acc += double(recv[size_t(r * mine + i)]);  // rank order
      red[size_t(i)] = float(acc);
    }
    check(MPI_Iallgatherv(red.data(), mine, MPI_FLOAT, x, cnt.data(), dsp.data(), MPI_FLOAT, MPI_COMM_WORLD, &req),
          "MPI_Iallgatherv (gradient all-gather)");
    if (!dl.wait(&req)) on_timeout("all-gather");
    // Every rank took part, so every arrival note was sent: collect them (bounded all the same).
    for (auto& r : notes)
      if (!dl.wait(&r)) on_timeout("arrival notes");
    if (rank_ == 0)
      for (int r = 1; r < size_; ++r)
        RELPOS_CHECK(arrived[size_t(r)] == seq, "rank {} is at collective {} while rank 0 is at {}: the ranks run "
                                                "different sequences of collectives", r, arrived[size_t(r)], seq);
  }

  std::vector<double> allgather(const std::vector<double>& v) override {
    std::vector<double> out(v.size() * size_t(size_));
    check(MPI_Allgather(v.data(), int(v.size()), MPI_DOUBLE, out.data(), int(v.size()), MPI_DOUBLE, MPI_COMM_WORLD),
          "MPI_Allgather");
    return out;
  }

  std::vector<uint64_t> allgather(uint64_t v) override {
    std::vector<uint64_t> out(static_cast<size_t>(size_));
    check(MPI_Allgather(&v, 1, MPI_UINT64_T, out.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD), "MPI_Allgather");
    return out;
  }

  void rendezvous(int64_t tag, double timeout_s, const std::string& what) override {
    if (size_ == 1) return;
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    // Polls until every request completed (-> {}) or the deadline passed (-> the indices left).
    auto wait_all = [&](std::vector<MPI_Request>& reqs) {
      std::vector<int> done(reqs.size(), 0);
      for (;;) {
        bool all = true;
        for (size_t i = 0; i < reqs.size(); ++i) {
          if (done[i]) continue;
          check(MPI_Test(&reqs[i], &done[i], MPI_STATUS_IGNORE), "MPI_Test");
          all = all && done[i];
        }
        if (all) return std::vector<int>{};
        if (Clock::now() > deadline) {
          std::vector<int> missing;
          for (size_t i = 0; i < reqs.size(); ++i)
            if (!done[i]) missing.push_back(int(i));
          return missing;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    };
    if (rank_ == 0) {
      std::vector<int64_t> got(size_t(size_ - 1), -1);
      std::vector<MPI_Request> reqs(size_t(size_ - 1));
      for (int r = 1; r < size_; ++r)
        check(MPI_Irecv(&got[size_t(r - 1)], 1, MPI_INT64_T, r, kTagArrive, MPI_COMM_WORLD, &reqs[size_t(r - 1)]),
              "MPI_Irecv");
      const std::vector<int> missing = wait_all(reqs);
      if (!missing.empty()) {
        std::string names;
        for (int i : missing) names += fmt::format("{}{}", names.empty() ? "" : ", ", i + 1);
        abort(1, fmt::format("error: rank {} did not reach {} within {} s (hung or dead; train.dist_timeout); "
                             "stopping all {} ranks", names, what, timeout_s, size_));
      }
      for (int r = 1; r < size_; ++r)
        RELPOS_CHECK(got[size_t(r - 1)] == tag, "rank {} is at {} (sequence {}) while rank 0 is at sequence {}: the "
                                                "ranks run different step sequences", r, what, got[size_t(r - 1)], tag);
      std::vector<MPI_Request> go(size_t(size_ - 1));
      for (int r = 1; r < size_; ++r)
        check(MPI_Isend(&tag, 1, MPI_INT64_T, r, kTagGo, MPI_COMM_WORLD, &go[size_t(r - 1)]), "MPI_Isend");
      check(MPI_Waitall(int(go.size()), go.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
    } else {
      MPI_Request send;
      check(MPI_Isend(&tag, 1, MPI_INT64_T, 0, kTagArrive, MPI_COMM_WORLD, &send), "MPI_Isend");
      int64_t answer = -1;
      std::vector<MPI_Request> reqs(1);
      check(MPI_Irecv(&answer, 1, MPI_INT64_T, 0, kTagGo, MPI_COMM_WORLD, &reqs[0]), "MPI_Irecv");
      if (!wait_all(reqs).empty())
        abort(1, fmt::format("error (rank {}): rank 0 did not answer at {} within {} s (rank 0 or another rank "
                             "is hung or dead; train.dist_timeout); stopping all {} ranks", rank_, what, timeout_s,
                             size_));
      MPI_Wait(&send, MPI_STATUS_IGNORE);
    }
  }

  [[noreturn]] void abort(int code, const std::string& message) override {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; if it did, do not run atexit's MPI_Finalize
  }

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  int64_t collective_seq_ = 0;  // allreduce_sum calls so far (the arrival notes carry it)
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiCommunicator>(); }

std::string mpi_library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string v(buf, size_t(len));
  v = v.substr(0, v.find_first_of("\n,"));
  return v;
}

}  // namespace relpos::train
