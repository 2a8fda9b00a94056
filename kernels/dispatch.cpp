// kernels/dispatch.cpp — the dispatch layer, generated from kernels/op_table.inc: every raw op
// of kernels/ops.h checks that its tensor inputs share one device, runs its argument checks
// (kernels/checks.cpp) and forwards to that device's backend (candle's shape: one switch per
// op, no virtual tensor backend). Also k::supports(), which asks the backend of a device.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "core/env.h"
#include "kernels/backend.h"
#include "kernels/checks.h"

namespace relpos::k {

namespace {

// The device every defined tensor in ts sits on; CPU when none is defined (the checks then
// report the undefined input). Mixed devices: an error naming the op and both operands.
template <typename... Ts>
Device device_of(const char* op, const Ts&... ts) {
  const Tensor* first = nullptr;
  Device dev = Device::CPU;
  auto visit = [&](const Tensor& t) {
    if (!t.defined()) return;
    if (!first) {
      first = &t;
      dev = t.device();
      return;
    }
    RELPOS_CHECK(t.device() == dev, "{}: inputs on different devices: {} and {} (move them with .to(Device))", op,
                 describe(*first), describe(t));
  };
  (visit(ts), ...);
  return dev;
}

// RELPOS_OP_PROFILE=1: every raw op of the table timed from its entry here to its return, summed
// per (op, dtype of its first tensor), and printed as a table to stderr when the process exits,
// with the time between the first and the last op call: what no op covers in that span is the
// engine, the allocator and the model's own code (and, with several threads, time the other
// threads spent in ops). An op called by another op (none is today) counts in the outer one
// only. CUDA ops are timed on the host: a kernel launch returns before the kernel ends. Off
// (unset, empty or "0"): one test of a flag per call.
class OpProfile {
 public:
  static OpProfile* get() {
    static OpProfile* const p = []() -> OpProfile* {
      if (!env_switch("RELPOS_OP_PROFILE")) return nullptr;
      static OpProfile profile;
      return &profile;
    }();
    return p;
  }
  void record(Op op, DType dtype, double t0, double t1) {
    std::lock_guard lock(mu_);
    Row& r = rows_[size_t(op)][size_t(dtype)];
    ++r.calls;
    r.ms += t1 - t0;
    first_ = std::min(first_, t0);
    last_ = std::max(last_, t1);
  }
  void restart() {
    std::lock_guard lock(mu_);
    rows_ = {};
    first_ = 1e300, last_ = -1e300;
  }
  ~OpProfile() {
    struct Line {
      Op op;
      DType dtype;
      Row row;
    };
    std::vector<Line> lines;
    double ms = 0;
    int64_t calls = 0;
    for (size_t o = 0; o < num_ops; ++o)
      for (size_t d = 0; d < kDTypes; ++d)
        if (rows_[o][d].calls) {
          lines.push_back({Op(o), DType(d), rows_[o][d]});
          ms += rows_[o][d].ms, calls += rows_[o][d].calls;
        }
    std::sort(lines.begin(), lines.end(), [](const Line& x, const Line& y) { return x.row.ms > y.row.ms; });
    const double span = calls ? last_ - first_ : 0.0;
    std::string out = fmt::format(
        "relpos op profile (RELPOS_OP_PROFILE=1): {} calls, {:.1f} ms in ops of the {:.1f} ms from the first op to "
        "the last ({:.1f}% outside ops)\n| op | dtype | calls | ms | ms/call | share of the ops |\n"
        "|---|---|---:|---:|---:|---:|\n",
        calls, ms, span, span > 0 ? 100.0 * (span - ms) / span : 0.0);
    for (const Line& l : lines)
      out += fmt::format("| {} | {} | {} | {:.2f} | {:.4f} | {:.1f}% |\n", op_name(l.op), dtype_name(l.dtype),
                         l.row.calls, l.row.ms, l.row.ms / double(l.row.calls), ms > 0 ? 100.0 * l.row.ms / ms : 0.0);
    std::fputs(out.c_str(), stderr);
  }

 private:
  static constexpr size_t kDTypes = kDTypeCount;
  struct Row {
    int64_t calls = 0;
    double ms = 0;
  };
  std::mutex mu_;
  std::array<std::array<Row, kDTypes>, num_ops> rows_{};
  double first_ = 1e300, last_ = -1e300;
};

// Times one op call when the profile is on and the call is not inside another op's.
class OpTimer {
 public:
  template <typename... Ts>
  explicit OpTimer(Op op, const Ts&... ts) : profile_(OpProfile::get()) {
    if (!profile_ || depth_++ > 0) return;
    op_ = op;
    const auto pick = [&](const auto& t) {  // the first defined tensor (the device list's label is not one)
      if constexpr (std::is_same_v<std::decay_t<decltype(t)>, Tensor>)
        if (!picked_ && t.defined()) dtype_ = t.dtype(), picked_ = true;
    };
    (pick(ts), ...);
    (void)pick;  // (no tensor: an op without tensor inputs)
    t0_ = steady_ms();
  }
  ~OpTimer() {
    if (!profile_ || --depth_ > 0) return;
    profile_->record(op_, dtype_, t0_, steady_ms());
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  OpProfile* profile_;
  Op op_{};
  DType dtype_ = DType::F32;
  bool picked_ = false;
  double t0_ = 0;
  static thread_local int depth_;
};
thread_local int OpTimer::depth_ = 0;

}  // namespace

bool env_switch(const char* name) {
  return env_value(name) == "1";  // the table (core/env.cpp) checked the value
}

double steady_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool op_profile_on() {
  return OpProfile::get() != nullptr;
}

void restart_profiles() {
  if (OpProfile* p = OpProfile::get()) p->restart();
  cpu::restart_gemm_profile();
}

bool supports(Device device, Op op, DType dtype) {
  return device == Device::CUDA ? cuda::supports(op, dtype) : cpu::supports(op, dtype);
}

}  // namespace relpos::k

namespace relpos {

// The forwarders are qualified definitions (k::name), so an op of the table that
// kernels/ops.h does not declare, or declares with other parameters, fails to compile.
#define RELPOS_DEVICE_OF(label, ...) k::device_of(label, __VA_ARGS__)
#define RELPOS_UNPAREN(...) __VA_ARGS__
#define RELPOS_OP(ret, name, params, args, devices)                \
  auto k::name params->ret {                                       \
    const Device dev = RELPOS_DEVICE_OF devices;                   \
    check::name args;                                              \
    const k::OpTimer timer(k::Op::name, RELPOS_UNPAREN devices);   \
    return dev == Device::CUDA ? cuda::name args : cpu::name args; \
  }
#define RELPOS_OP_PLAN(ret, name, params, args, devices, Plan, bparams, bargs) \
  auto k::name params->ret {                                                   \
    const Device dev = RELPOS_DEVICE_OF devices;                               \
    const Plan plan = check::name args;                                        \
    const k::OpTimer timer(k::Op::name, RELPOS_UNPAREN devices);               \
    return dev == Device::CUDA ? cuda::name bargs : cpu::name bargs;           \
  }
#define RELPOS_OP_ON_DEVICE(ret, name, params, args)                  \
  auto k::name(RELPOS_UNPAREN params, Device device)->ret {           \
    check::name args;                                                 \
    const k::OpTimer timer(k::Op::name);                              \
    return device == Device::CUDA ? cuda::name args : cpu::name args; \
  }
#include "kernels/op_table.inc"
#undef RELPOS_DEVICE_OF
#undef RELPOS_UNPAREN

}  // namespace relpos
