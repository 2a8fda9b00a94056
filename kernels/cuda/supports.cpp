// kernels/cuda/supports.cpp — what the CUDA backend (built with nvcc) has kernels for: every
// op of kernels/op_table.inc but the fused attention pair (kernels/cuda/attention.cpp
// refuses them), in float32 and float64, int64 data where takes_int64() says so.
#include "kernels/backend.h"

namespace relpos::k::cuda {

bool supports(Op op, DType dtype) {
  if (op == Op::attention || op == Op::attention_backward) return false;
  return is_floating(dtype) || takes_int64(op);
}

}  // namespace relpos::k::cuda
