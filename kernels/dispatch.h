// kernels/dispatch.h — device checks at op entry. Ops that have no CUDA kernel yet refuse
// cuda tensors with a message saying so (or that the build has no CUDA at all).
#pragma once
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace relpos::k {

template <typename... Ts>
void require_cpu(const char* op, const Ts&... ts) {
  bool any_cuda = ((ts.defined() && ts.device() == Device::CUDA) || ...);
  if (!any_cuda) return;
  if (!cuda::built_with_cuda()) fail("{}: built without CUDA support", op);
  fail("{}: no CUDA kernel for this op yet; move the tensors to cpu", op);
}

}  // namespace relpos::k
