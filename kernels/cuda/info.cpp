// kernels/cuda/info.cpp — k::cuda_library_info() of a CUDA build: the cuBLAS version.
#include <fmt/format.h>

#include "kernels/cuda/host.h"

namespace relpos::k {

std::string cuda_library_info() {
  int major = 0, minor = 0, patch = 0;
  try {  // (cuBLAS is loaded on first use, kernels/cuda/cublas_loader.cuh: it may be missing)
    cuda::dev::cublas_version(&major, &minor, &patch);
  } catch (const Error& e) {
    return fmt::format("cuBLAS not loadable ({})", e.what());
  }
  return fmt::format("cuBLAS {}.{}.{}", major, minor, patch);
}

}  // namespace relpos::k
