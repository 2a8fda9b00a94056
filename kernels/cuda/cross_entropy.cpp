// kernels/cuda/cross_entropy.cpp — CUDA entry points of the fused cross-entropy. Targets are
// copied to the host once to validate them and count the rows not ignored (count is a host
// integer in the op's contract); the rest runs on the device (cross_entropy.cu).
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

static_assert(int(Reduction::Mean) == 0 && int(Reduction::Sum) == 1 && int(Reduction::None) == 2);

namespace {

void check_ce_float(const Tensor& logits, const char* op) {  // after the target checks, as on the CPU
  RELPOS_CHECK(is_floating(logits.dtype()), "{}: expected a floating dtype (float32 or float64), got {}", op,
               dtype_name(logits.dtype()));
}

}  // namespace

CrossEntropyOut cross_entropy(const Tensor& logits_in, const Tensor& target, int64_t ignore_index,
                              Reduction reduction) {
  Tensor logits = logits_in.contiguous();
  const int64_t N = logits.size(0), C = logits.size(1);
  std::vector<int64_t> tg = target.to_vector<int64_t>();
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (tg[size_t(n)] == ignore_index) continue;
    RELPOS_CHECK(tg[size_t(n)] >= 0 && tg[size_t(n)] < C, "cross_entropy: target {} at row {} out of range [0, {})",
                 tg[size_t(n)], n, C);
    ++count;
  }
  check_ce_float(logits, "cross_entropy");
  Tensor tc = target.contiguous();
  CrossEntropyOut out{Tensor(), empty_cuda({N}, logits.dtype()), count};
  Tensor per_row = empty_cuda({N}, logits.dtype());
  const dev::DT t = dt(logits.dtype());
  dev::ce_forward(t, logits.raw_data(), tc.data<int64_t>(), N, C, ignore_index, out.lse.raw_data(),
                  per_row.raw_data());
  if (reduction == Reduction::None) {
    out.loss = per_row;
  } else {
    out.loss = empty_cuda({}, logits.dtype());
    const double divisor = reduction == Reduction::Mean ? double(count) : 1.0;  // mean of nothing = 0, as the CPU
    dev::ce_reduce(t, out.loss.raw_data(), per_row.raw_data(), N, divisor);
  }
  return out;
}

Tensor cross_entropy_backward(const Tensor& g, const Tensor& logits_in, const Tensor& lse, const Tensor& target,
                              int64_t ignore_index, Reduction reduction, int64_t count) {
  Tensor logits = logits_in.contiguous();
  const int64_t N = logits.size(0), C = logits.size(1);
  // Targets are validated again, as on the CPU (which reads them on the host).
  std::vector<int64_t> tg = target.to_vector<int64_t>();
  for (int64_t n = 0; n < N; ++n)
    RELPOS_CHECK(tg[size_t(n)] == ignore_index || (tg[size_t(n)] >= 0 && tg[size_t(n)] < C),
                 "cross_entropy_backward: target {} at row {} out of range [0, {})", tg[size_t(n)], n, C);
  check_ce_float(logits, "cross_entropy_backward");
  Tensor tc = target.contiguous(), gc = g.contiguous(), lc = lse.contiguous();
  Tensor dx = empty_cuda({N, C}, logits.dtype());
  dev::ce_backward(dt(logits.dtype()), dx.raw_data(), gc.raw_data(), int(reduction), count, logits.raw_data(),
                   lc.raw_data(), tc.data<int64_t>(), N, C, ignore_index);
  return dx;
}

}  // namespace relpos::k::cuda
