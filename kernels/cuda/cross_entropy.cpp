// kernels/cuda/cross_entropy.cpp — CUDA entry points of the fused cross-entropy. Nothing is
// read back: targets are range-checked on the device (a bad one is thrown, with the CPU's
// message, at the next host read) and the count of rows not ignored stays on the device
// (CrossEntropyOut::count_device; count is -1).
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

static_assert(int(Reduction::Mean) == 0 && int(Reduction::Sum) == 1 && int(Reduction::None) == 2);

namespace {

void check_ce_float(const Tensor& logits, const char* op) {  // the targets are checked later, on the device
  RELPOS_CHECK(is_floating(logits.dtype()), "{}: expected a floating dtype (float32 or float64), got {}", op,
               dtype_name(logits.dtype()));
}

}  // namespace

namespace {

// The CPU's "<op>: target T at row N out of range [0, C)", built from the target tensor.
dev::Check target_check(const Tensor& target, int64_t C, const char* op) {
  return device_check([target, C, op](uint64_t row) {
    return fmt::format("{}: target {} at row {} out of range [0, {})", op, element(target, row), row, C);
  });
}

}  // namespace

CrossEntropyOut cross_entropy(const Tensor& logits_in, const Tensor& target, int64_t ignore_index,
                              Reduction reduction) {
  check_ce_float(logits_in, "cross_entropy");
  Tensor logits = logits_in.contiguous();
  const int64_t N = logits.size(0), C = logits.size(1);
  Tensor tc = target.contiguous();
  CrossEntropyOut out{Tensor(), empty_cuda({N}, logits.dtype()), -1, zeros_cuda({}, DType::I64)};
  if (N > 0) dev::ce_count(tc.data<int64_t>(), N, ignore_index, out.count_device.data<int64_t>());
  Tensor per_row = empty_cuda({N}, logits.dtype());
  const dev::DT t = dt(logits.dtype());
  if (N > 0)
    dev::ce_forward(t, logits.raw_data(), tc.data<int64_t>(), N, C, ignore_index, out.lse.raw_data(),
                    per_row.raw_data(), target_check(target, C, "cross_entropy"));
  if (reduction == Reduction::None) {
    out.loss = per_row;
  } else {
    out.loss = empty_cuda({}, logits.dtype());
    // mean of nothing = 0, as the CPU
    dev::ce_reduce(t, out.loss.raw_data(), per_row.raw_data(), N,
                   reduction == Reduction::Mean ? out.count_device.data<int64_t>() : nullptr);
  }
  return out;
}

Tensor cross_entropy_backward(const Tensor& g, const Tensor& logits_in, const Tensor& lse, const Tensor& target,
                              int64_t ignore_index, Reduction reduction, int64_t count) {
  check_ce_float(logits_in, "cross_entropy_backward");
  Tensor logits = logits_in.contiguous();
  const int64_t N = logits.size(0), C = logits.size(1);
  Tensor tc = target.contiguous(), gc = g.contiguous(), lc = lse.contiguous();
  Tensor dx = empty_cuda({N, C}, logits.dtype());
  if (N * C == 0) return dx;
  Tensor count_dev;  // the forward's count is on the device: count the rows again there
  if (reduction == Reduction::Mean && count < 0) {
    count_dev = empty_cuda({}, DType::I64);
    dev::ce_count(tc.data<int64_t>(), N, ignore_index, count_dev.data<int64_t>());
  }
  // Targets are validated again, as on the CPU.
  dev::ce_backward(dt(logits.dtype()), dx.raw_data(), gc.raw_data(), int(reduction),
                   count_dev.defined() ? count_dev.data<int64_t>() : nullptr, count, logits.raw_data(), lc.raw_data(),
                   tc.data<int64_t>(), N, C, ignore_index, target_check(target, C, "cross_entropy_backward"));
  return dx;
}

}  // namespace relpos::k::cuda
