// trainers/mpi/comm_mpi.cpp — see comm_mpi.h.
#include "relpos/trainers/mpi/comm_mpi.h"

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

#include "relpos/core/error.h"

namespace relpos::train {
namespace {

constexpr int kTagArrive = 7101, kTagGo = 7102;

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, buf, &len);
  throw Error(fmt::format("MPI: {} failed: {}", what, std::string_view(buf, size_t(len))));
}

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

  void allreduce_sum(float* x, int64_t n) override {
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
    // Every rank's copy of my chunk, rank-major.
    std::vector<float> recv(size_t(mine) * size_t(N));
    std::vector<int> rcnt(static_cast<size_t>(N), mine), rdsp(static_cast<size_t>(N));
    for (int64_t r = 0; r < N; ++r) rdsp[size_t(r)] = int(r * mine);
    check(MPI_Alltoallv(x, cnt.data(), dsp.data(), MPI_FLOAT, recv.data(), rcnt.data(), rdsp.data(), MPI_FLOAT,
                        MPI_COMM_WORLD),
          "MPI_Alltoallv (gradient reduce-scatter)");
    std::vector<float> red(static_cast<size_t>(mine));
    for (int i = 0; i < mine; ++i) {
      double acc = 0;
      for (int64_t r = 0; r < N; ++r) acc += double(recv[size_t(r * mine + i)]);  // rank order
      red[size_t(i)] = float(acc);
    }
    check(MPI_Allgatherv(red.data(), mine, MPI_FLOAT, x, cnt.data(), dsp.data(), MPI_FLOAT, MPI_COMM_WORLD),
          "MPI_Allgatherv (gradient all-gather)");
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
