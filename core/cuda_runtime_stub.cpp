// core/cuda_runtime_stub.cpp — used when relpos is built without CUDA (RELPOS_CUDA=OFF).
#include "core/cuda_runtime.h"
#include "core/error.h"

namespace relpos::cuda {

bool built_with_cuda() { return false; }
int device_count() { return 0; }
bool available() { return false; }
void set_device(int) { fail("built without CUDA support (configure with -DRELPOS_CUDA=ON)"); }
std::string unavailable_reason() { return "built without CUDA support (configure with -DRELPOS_CUDA=ON)"; }
void* malloc_device(size_t, bool) { fail("built without CUDA support (configure with -DRELPOS_CUDA=ON)"); }
void free_device(void*, size_t) {}
void empty_cache() {}
size_t cached_bytes() { return 0; }
void memset_device(void*, int, size_t) { fail("built without CUDA support"); }
void copy_to_device(void*, const void*, size_t) { fail("built without CUDA support"); }
void copy_to_host(void*, const void*, size_t, bool) {
  fail("built without CUDA support");
}
void copy_device_to_device(void*, const void*, size_t) { fail("built without CUDA support"); }
TransferStats transfer_stats() {
  return {};
}
void reset_transfer_stats() {}
DeviceCheck begin_device_check(std::function<std::string(uint64_t)>) {
  fail("built without CUDA support");
}
void check_device_errors() {}
size_t pending_device_checks() {
  return 0;
}

}  // namespace relpos::cuda

namespace relpos::cuda {

void strided_copy(const StridedView&, const StridedView&) { fail("built without CUDA support"); }
void strided_fill(const StridedView&, double) { fail("built without CUDA support"); }
void synchronize() {}
std::vector<DeviceInfo> devices() { return {}; }
std::string runtime_version() { return "built without CUDA support"; }

}  // namespace relpos::cuda
