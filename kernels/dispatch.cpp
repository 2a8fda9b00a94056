// kernels/dispatch.cpp — the dispatch layer, generated from kernels/op_table.inc: every raw op
// of kernels/ops.h checks that its tensor inputs share one device, runs its argument checks
// (kernels/checks.cpp) and forwards to that device's backend (candle's shape: one switch per
// op, no virtual tensor backend). Also k::supports(), which asks the backend of a device.
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

}  // namespace

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
    return dev == Device::CUDA ? cuda::name args : cpu::name args; \
  }
#define RELPOS_OP_ON_DEVICE(ret, name, params, args)                  \
  auto k::name(RELPOS_UNPAREN params, Device device)->ret {           \
    check::name args;                                                 \
    return device == Device::CUDA ? cuda::name args : cpu::name args; \
  }
#include "kernels/op_table.inc"
#undef RELPOS_DEVICE_OF
#undef RELPOS_UNPAREN

}  // namespace relpos
