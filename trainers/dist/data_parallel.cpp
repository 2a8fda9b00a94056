// trainers/dist/data_parallel.cpp — see data_parallel.h.
#include "trainers/dist/data_parallel.h"
#include "core/env.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

#include "core/error.h"
#include "core/shape.h"

namespace relpos::train {
namespace {

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ULL) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

Tensor rows(const Tensor& t, int64_t start, int64_t n) {
  return t.defined() ? t.narrow(0, start, n).contiguous() : t;
}

std::string rank_list(const std::vector<int>& r) {
  std::string s;
  for (int x : r) s += fmt::format("{}{}", s.empty() ? "" : ", ", x);
  return s;
}

// The ranks whose gathered value differs from rank 0's.
std::vector<int> ranks_differing(const std::vector<uint64_t>& all) {
  std::vector<int> differ;
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) differ.push_back(int(r));
  return differ;
}

}  // namespace

Fault fault_from_env() {
  Fault f;
  const std::string s = env_value("RELPOS_FAULT");  // the form is checked by the table (core/env.cpp)
  if (s.empty()) return f;
  const size_t a = s.find(':'), b = a == std::string::npos ? a : s.find(':', a + 1);
  try {
    RELPOS_CHECK_CONFIG(b != std::string::npos, "RELPOS_FAULT: expected KIND:RANK:STEP, got '{}'", s);
    f.kind = s.substr(0, a);
    f.rank = std::stoi(s.substr(a + 1, b - a - 1));
    f.step = std::stoll(s.substr(b + 1));
  } catch (const std::logic_error&) {
    fail_config("RELPOS_FAULT: expected KIND:RANK:STEP with integer RANK and STEP, got '{}'", s);
  }
  RELPOS_CHECK_CONFIG(f.kind == "hang" || f.kind == "exit" || f.kind == "diverge" || f.kind == "stall",
                      "RELPOS_FAULT: KIND must be hang, exit, diverge or stall, got '{}'", f.kind);
  return f;
}

DataParallel::DataParallel(Communicator& comm, const Config& cfg)
    : comm_(comm), timeout_s_(cfg.train.dist_timeout), check_every_(cfg.train.check_every), fault_(fault_from_env()) {
  // A test hook of the data-parallel failure tests: in any other run it would hang, exit or
  // perturb the model silently, so it is refused before anything runs.
  RELPOS_CHECK_CONFIG(fault_.kind.empty() || active(),
                      "environment RELPOS_FAULT={}:{}:{}: a test hook for data-parallel runs (mpirun -np N, N >= 2); "
                      "this run has 1 process: unset RELPOS_FAULT",
                      fault_.kind, fault_.rank, fault_.step);
  RELPOS_CHECK_CONFIG(fault_.kind.empty() || fault_.rank < world(),
                      "environment RELPOS_FAULT={}:{}:{}: rank {} does not exist (this run has {} ranks)", fault_.kind,
                      fault_.rank, fault_.step, fault_.rank, world());
}

Config DataParallel::global_data_config(const Config& cfg) const {
  Config g = cfg;
  int64_t b = 0;
  RELPOS_CHECK_CONFIG(checked_mul(cfg.data.batch_size, int64_t(world()), b),
                      "data.batch_size ({}) x {} ranks overflows a 64-bit integer", cfg.data.batch_size, world());
  g.data.batch_size = b;
  return g;
}

Batch DataParallel::shard(const Batch& g) const {
  if (!active()) return g;
  const int64_t B = g.input.size(0) / world();
  RELPOS_CHECK(B * world() == g.input.size(0), "data-parallel: a global batch of {} rows does not split over {} ranks",
               g.input.size(0), world());
  const int64_t lo = B * rank();
  return Batch{rows(g.input, lo, B), rows(g.target, lo, B),         rows(g.dec_input, lo, B),
               rows(g.padding, lo, B), rows(g.position_index, lo, B), rows(g.positions, lo, B)};
}

int64_t DataParallel::count_targets(const Batch& b) {
  int64_t n = 0;
  for (int64_t t : b.target.to_vector<int64_t>()) n += t != kIgnore;
  return n;
}

void DataParallel::check_same_config(const Config& cfg, const std::vector<std::string>& vocab) {
  uint64_t h = fnv1a(cfg.yaml.data(), cfg.yaml.size());
  for (const auto& v : vocab) h = fnv1a(v.data(), v.size() + 1, h);  // + the terminating 0 as separator
  const std::vector<int> differ = ranks_differing(comm_.allgather(h));
  RELPOS_CHECK_CONFIG(differ.empty(),
                      "data-parallel: rank {} runs a different config or data than rank 0 (effective config + "
                      "vocabulary differ); every rank must be started with the same config, --set overrides and "
                      "data file", rank_list(differ));
}

void DataParallel::rendezvous(int64_t seq, const std::string& what) {
  if (active()) comm_.rendezvous(seq, timeout_s_, what);
}

void DataParallel::sum_gradients(const std::vector<Variable>& params, std::vector<double>& scalars) {
  if (!active()) return;
  // One flat float32 buffer for every gradient: one collective per step.
  int64_t n = 0;
  for (const auto& p : params)
    if (p.grad().defined()) n += p.grad().numel();
  std::vector<float> flat(static_cast<size_t>(n));
  int64_t at = 0;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    const Tensor host = p.grad().device() == Device::CPU ? p.grad() : p.grad().to(Device::CPU);
    const std::vector<float> v = host.to_vector<float>();
    std::memcpy(flat.data() + at, v.data(), v.size() * sizeof(float));
    at += int64_t(v.size());
  }
  comm_.allreduce_sum(flat.data(), n, timeout_s_, "the gradient all-reduce");
  at = 0;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    const int64_t m = p.grad().numel();
    std::vector<float> part(flat.begin() + at, flat.begin() + at + m);
    p.grad().copy_(Tensor::from_vector(part, p.grad().shape()));  // copy_ converts dtype and device
    at += m;
  }
  const std::vector<double> all = comm_.allgather(scalars);
  for (size_t i = 0; i < scalars.size(); ++i) {
    double s = 0;
    for (int r = 0; r < world(); ++r) s += all[size_t(r) * scalars.size() + i];  // rank order
    scalars[i] = s;
  }
}

void DataParallel::check_parameters(const nn::Model& model, int64_t step, bool force) {
  if (!active() || (!force && (check_every_ <= 0 || step % check_every_ != 0))) return;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& [name, p] : model.named_parameters()) {
    const Tensor host = p.data().device() == Device::CPU ? p.data().contiguous() : p.data().to(Device::CPU);
    const std::vector<double> v = host.to_vector<double>();  // exact for float32 and float64
    h = fnv1a(v.data(), v.size() * sizeof(double), fnv1a(name.data(), name.size(), h));
  }
  const std::vector<int> differ = ranks_differing(comm_.allgather(h));
  RELPOS_CHECK(differ.empty(),
               "data-parallel: after step {} the parameters of rank {} differ from rank 0's (checksum over every "
               "parameter, train.check_every = {}): the replicas diverged silently", step, rank_list(differ),
               check_every_);
}

void DataParallel::await_root_abort() const {
  std::this_thread::sleep_for(std::chrono::duration<double>(timeout_s_));
  fail("rank {}: rank 0 did not stop the job within train.dist_timeout ({} s) after a collective abort", rank(),
       timeout_s_);
}

void DataParallel::inject_fault_before(int64_t step) const {
  if (fault_.rank != rank() || fault_.step != step) return;
  if (fault_.kind == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(60));
  if (fault_.kind == "exit") std::_Exit(3);
}

void DataParallel::inject_fault_in_step(int64_t step) const {
  // "stall": the rank stops between its backward and the gradient all-reduce, as a rank
  // stopped with SIGSTOP (or stuck in I/O) mid-step would: the others wait inside a collective.
  if (fault_.kind != "stall" || fault_.rank != rank() || fault_.step != step) return;
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(60));
}

void DataParallel::inject_fault_after(int64_t step, nn::Model& model) const {
  if (fault_.kind != "diverge" || fault_.rank != rank() || fault_.step != step) return;
  const Variable p = model.parameters().front();
  std::vector<double> v = p.data().to_vector<double>();
  v[0] += 1e-3;
  p.data().copy_(Tensor::from_vector(v, p.data().shape()));
}

}  // namespace relpos::train
