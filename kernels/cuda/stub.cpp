// kernels/cuda/stub.cpp — the CUDA backend of a build without nvcc: every op of
// kernels/backend_ops.inc refuses with a message saying so. Builds with nvcc compile
// kernels/cuda/*.cu instead. (Generated from backend_ops.inc; parameter names dropped.)
#include "kernels/backend.h"

namespace relpos::k::cuda {

namespace {
[[noreturn]] void no_cuda(const char* op) {
  fail("{}: this relpos was built without CUDA support (rebuild with nvcc and -DRELPOS_CUDA=ON)", op);
}
}  // namespace

Tensor unary(Unary, const Tensor&, double, double) { no_cuda("unary"); }
Tensor unary_grad(Unary, const Tensor&, const Tensor&, double, double) { no_cuda("unary_grad"); }
Tensor binary(Binary, const Tensor&, const Tensor&) { no_cuda("binary"); }
Tensor where(const Tensor&, const Tensor&, const Tensor&) { no_cuda("where"); }
Tensor causal_fill(const Tensor&, int64_t, int64_t, double) { no_cuda("causal_fill"); }
void add_(const Tensor&, const Tensor&, double) { no_cuda("add_"); }
void mul_(const Tensor&, double) { no_cuda("mul_"); }
Tensor reduce(Reduce, const Tensor&, std::vector<int64_t>, bool, int64_t) { no_cuda("reduce"); }
Tensor sum_squares(const Tensor&) { no_cuda("sum_squares"); }
Tensor matmul(const Tensor&, const Tensor&) { no_cuda("matmul"); }
Tensor softmax(const Tensor&, int64_t) { no_cuda("softmax"); }
Tensor log_softmax(const Tensor&, int64_t) { no_cuda("log_softmax"); }
Tensor softmax_backward(const Tensor&, const Tensor&, int64_t) { no_cuda("softmax_backward"); }
Tensor log_softmax_backward(const Tensor&, const Tensor&, int64_t) { no_cuda("log_softmax_backward"); }
NormOut layer_norm(const Tensor&, const Tensor&, const Tensor&, double) { no_cuda("layer_norm"); }
NormOut rms_norm(const Tensor&, const Tensor&, double) { no_cuda("rms_norm"); }
NormGrads layer_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool) { no_cuda("layer_norm_backward"); }
NormGrads rms_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { no_cuda("rms_norm_backward"); }
Tensor embedding(const Tensor&, const Tensor&) { no_cuda("embedding"); }
Tensor embedding_backward(const Tensor&, const Tensor&, int64_t) { no_cuda("embedding_backward"); }
Tensor index_select(const Tensor&, int64_t, const Tensor&) { no_cuda("index_select"); }
Tensor index_add(const Shape&, int64_t, const Tensor&, const Tensor&) { no_cuda("index_add"); }
Tensor gather(const Tensor&, int64_t, const Tensor&) { no_cuda("gather"); }
Tensor scatter_add(const Shape&, int64_t, const Tensor&, const Tensor&) { no_cuda("scatter_add"); }
AttentionOut attention(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const AttentionArgs&, const AttentionBuckets&, const AttentionIndexBias&) { no_cuda("attention"); }
AttentionGrads attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const AttentionOut&, const AttentionArgs&, const AttentionBuckets&, const Tensor&, const AttentionIndexBias&) { no_cuda("attention_backward"); }
Tensor toeplitz_add(const Tensor&, const Tensor&) { no_cuda("toeplitz_add"); }
Tensor toeplitz_diag_sum(const Tensor&) { no_cuda("toeplitz_diag_sum"); }
Tensor rotary(const Tensor&, const Tensor&, bool, bool) { no_cuda("rotary"); }
Tensor dropout_mask(const Shape&, double, Generator&, DType) { no_cuda("dropout_mask"); }
CrossEntropyOut cross_entropy(const Tensor&, const Tensor&, int64_t, Reduction) { no_cuda("cross_entropy"); }
Tensor cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, Reduction, int64_t) { no_cuda("cross_entropy_backward"); }
void adam_update(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const AdamStep&) { no_cuda("adam_update"); }

}  // namespace relpos::k::cuda

namespace relpos::k {
std::string cuda_library_info() { return "built without CUDA support"; }
}  // namespace relpos::k
