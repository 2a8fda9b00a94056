// kernels/cuda/softmax.cpp — CUDA entry points of the softmax family: the dim is moved last
// (a copy only if needed, as kernels/cpu/softmax.cpp does), softmax.cu does one block per
// row, and the result is moved back.
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

namespace {

Tensor rowwise(int kind, const std::vector<Tensor>& ins, int64_t dim, const char* op) {
  const Tensor& x0 = ins[0];
  dim = wrap_dim(dim, x0.dim(), op);
  const int64_t last = std::max<int64_t>(x0.dim() - 1, 0);
  std::vector<Tensor> cs;
  for (const Tensor& t : ins) {
    cs.push_back((x0.dim() == 0 ? t : t.transpose(dim, last)).contiguous());
  }
  Tensor out = empty_cuda(cs[0].shape(), x0.dtype());
  const int64_t n = x0.dim() == 0 ? 1 : x0.size(dim);
  const int64_t rows = n == 0 ? 0 : x0.numel() / n;
  dev::softmax_rows(kind, dt(x0.dtype()), out.raw_data(), cs[0].raw_data(),
                    cs.size() > 1 ? cs[1].raw_data() : nullptr, rows, n);
  return x0.dim() == 0 ? out : out.transpose(dim, last).contiguous();
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return rowwise(0, {x}, dim, "softmax"); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return rowwise(1, {x}, dim, "log_softmax"); }
Tensor softmax_backward(const Tensor& y, const Tensor& gy, int64_t dim) {
  return rowwise(2, {y, gy}, dim, "softmax_backward");
}
Tensor log_softmax_backward(const Tensor& y, const Tensor& gy, int64_t dim) {
  return rowwise(3, {y, gy}, dim, "log_softmax_backward");
}

}  // namespace relpos::k::cuda
