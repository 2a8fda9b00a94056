// kernels/cuda/info.cu — library versions for `relpos info` (no handle, no device needed).
#include <cublas_v2.h>

#include "kernels/cuda/launch.h"

namespace relpos::k::cuda::dev {

void cublas_version(int* major, int* minor, int* patch) {
  *major = *minor = *patch = -1;
  cublasGetProperty(MAJOR_VERSION, major);
  cublasGetProperty(MINOR_VERSION, minor);
  cublasGetProperty(PATCH_LEVEL, patch);
}

}  // namespace relpos::k::cuda::dev
