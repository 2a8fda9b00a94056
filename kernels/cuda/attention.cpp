// kernels/cuda/attention.cpp — the fused attention entries of the CUDA backend. There is no
// CUDA flash kernel yet (issue 9); the attention layer takes the reference path (matmul,
// Toeplitz add, masks, softmax: all CUDA kernels) for tensors on cuda, so these entries are
// reached only by a direct call, which gets a clear refusal.
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

AttentionOut attention(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                       const AttentionArgs&, const AttentionBuckets&, const AttentionIndexBias&) {
  fail("attention: no fused CUDA kernel yet (model.attention: fused uses it on the CPU only; on cuda the "
       "attention layer runs the reference path)");
}

AttentionGrads attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                  const Tensor&, const AttentionOut&, const AttentionArgs&, const AttentionBuckets&,
                                  const Tensor&, const AttentionIndexBias&) {
  fail("attention_backward: no fused CUDA kernel yet");
}

}  // namespace relpos::k::cuda
