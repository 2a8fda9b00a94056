// kernels/backend.h — the backends behind kernels/ops.h. Each backend namespace declares the
// same contract (kernels/backend_ops.inc); dispatch.cpp is the only caller.
//   k::cpu  — kernels/cpu/*.cpp: OpenBLAS GEMM + OpenMP loops (core/strided.h)
//   k::cuda — kernels/cuda/*.cu: cuBLAS + CUDA kernels; kernels/cuda/stub.cpp when built
//             without nvcc (every entry throws "built without CUDA support")
#pragma once
#include "kernels/ops.h"

namespace relpos::k::cpu {
#include "kernels/backend_ops.inc"
}  // namespace relpos::k::cpu

namespace relpos::k::cuda {
#include "kernels/backend_ops.inc"
}  // namespace relpos::k::cuda
