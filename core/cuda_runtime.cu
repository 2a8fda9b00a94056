// core/cuda_runtime.cu — CUDA runtime shim (see cuda_runtime.h). Errors go through
// CUDA_CHECK, which throws relpos::Error naming the call and the CUDA error string.
#include <cuda_runtime.h>

#include "core/cuda_runtime.h"
#include "core/error.h"

#define CUDA_CHECK(call)                                                                   \
  do {                                                                                     \
    cudaError_t err_ = (call);                                                             \
    if (err_ != cudaSuccess) ::relpos::fail("CUDA error in {}: {}", #call, cudaGetErrorString(err_)); \
  } while (0)

namespace relpos::cuda {

bool built_with_cuda() { return true; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

bool available() { return device_count() > 0; }

void* malloc_device(size_t nbytes) {
  RELPOS_CHECK(available(), "no CUDA device: cannot allocate {} bytes on cuda", nbytes);
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, nbytes == 0 ? 1 : nbytes));
  CUDA_CHECK(cudaMemset(p, 0, nbytes));
  return p;
}

void free_device(void* p) { cudaFree(p); }
void copy_to_device(void* dst, const void* src, size_t n) {
  CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
}
void copy_to_host(void* dst, const void* src, size_t n) {
  CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
}
void copy_device_to_device(void* dst, const void* src, size_t n) {
  CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice));
}

}  // namespace relpos::cuda
