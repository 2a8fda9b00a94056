// core/cuda_runtime.h — the few CUDA runtime calls core needs (memory and device query).
// Implemented in cuda_runtime.cu when built with CUDA, else by a stub that throws
// "built without CUDA support". Without a GPU, device_count() is 0 and allocation throws
// "no CUDA device".
#pragma once
#include <cstddef>

namespace relpos::cuda {

bool built_with_cuda();
int device_count();          // 0 when no driver/device (never throws)
bool available();            // device_count() > 0
void* malloc_device(size_t nbytes);  // zeroed
void free_device(void* p);
void copy_to_device(void* dst, const void* src, size_t nbytes);
void copy_to_host(void* dst, const void* src, size_t nbytes);
void copy_device_to_device(void* dst, const void* src, size_t nbytes);

}  // namespace relpos::cuda
