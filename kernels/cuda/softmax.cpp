// kernels/cuda/softmax.cpp — CUDA entry points of the softmax family: the dim is moved last
// (a copy only if needed, as kernels/cpu/softmax.cpp does), softmax.cu does one block per
// row, and the result is moved back.
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

namespace {

Tensor rowwise(int kind, const RowsPlan& plan, const std::vector<Tensor>& ins) {
  const Tensor& x0 = ins[0];
  std::vector<Tensor> cs;
  for (const Tensor& t : ins) {
    cs.push_back((x0.dim() == 0 ? t : t.transpose(plan.dim, plan.last)).contiguous());
  }
  Tensor out = empty_cuda(cs[0].shape(), x0.dtype());
  dev::softmax_rows(kind, dt(x0.dtype()), out.raw_data(), cs[0].raw_data(),
                    cs.size() > 1 ? cs[1].raw_data() : nullptr, plan.rows, plan.n);
  return x0.dim() == 0 ? out : out.transpose(plan.dim, plan.last).contiguous();
}

}  // namespace

Tensor softmax(const RowsPlan& plan, const Tensor& x) { return rowwise(0, plan, {x}); }
Tensor log_softmax(const RowsPlan& plan, const Tensor& x) { return rowwise(1, plan, {x}); }
Tensor softmax_backward(const RowsPlan& plan, const Tensor& y, const Tensor& gy) {
  return rowwise(2, plan, {y, gy});
}
Tensor log_softmax_backward(const RowsPlan& plan, const Tensor& y, const Tensor& gy) {
  return rowwise(3, plan, {y, gy});
}

}  // namespace relpos::k::cuda
