// kernels/cuda/info.cu — library versions for `relpos info` (no handle, no device needed).
#include <cublas_v2.h>

#include "kernels/cuda/cublas_loader.cuh"
#include "kernels/cuda/launch.h"

namespace relpos::k::cuda::dev {

void cublas_version(int* major, int* minor, int* patch) {
  *major = *minor = *patch = -1;
  const CublasApi& api = cublas();  // (loads cuBLAS: `relpos info` names the version it would use)
  api.get_property(MAJOR_VERSION, major);
  api.get_property(MINOR_VERSION, minor);
  api.get_property(PATCH_LEVEL, patch);
}

}  // namespace relpos::k::cuda::dev
