// kernels/cuda/cublas_loader.cu — see cublas_loader.cuh.
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "kernels/cuda/cublas_loader.cuh"
#include "kernels/cuda/launch.h"

namespace relpos::k::cuda::dev {

namespace {

// The exported name of a cuBLAS entry point: cublas_v2.h maps some names to versioned symbols
// (cublasCreate -> cublasCreate_v2), so the macro is expanded before it is made a string.
#define RELPOS_CUBLAS_NAME_(x) #x
#define RELPOS_CUBLAS_NAME(x) RELPOS_CUBLAS_NAME_(x)

void* open_library(std::string& tried) {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  for (const std::string& path : {std::string(RELPOS_CUBLAS_LIBRARY), soname}) {
    if (path.empty()) continue;
    if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    const char* why = dlerror();
    tried += (tried.empty() ? "" : "; ") + path + ": " + (why ? why : "not found");
  }
  return nullptr;
}

template <typename F>
void resolve(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) {
    const std::string msg = std::string("cuBLAS has no symbol ") + name;
    throw_error("cuBLAS", "dlsym", msg.c_str());
  }
}

}  // namespace

const CublasApi& cublas() {
  static std::mutex mu;
  static CublasApi api{};
  static bool loaded = false;
  std::lock_guard<std::mutex> lock(mu);
  if (!loaded) {  // (a failed load throws and is tried again at the next call)
    std::string tried;
    void* lib = open_library(tried);  // never closed: cuBLAS handles live as long as the process
    if (!lib) throw_error("cuBLAS", "dlopen", ("cannot load cuBLAS (" + tried + ")").c_str());
    CublasApi a{};
    resolve(lib, a.create, RELPOS_CUBLAS_NAME(cublasCreate));
    resolve(lib, a.set_math_mode, RELPOS_CUBLAS_NAME(cublasSetMathMode));
    resolve(lib, a.get_property, RELPOS_CUBLAS_NAME(cublasGetProperty));
    resolve(lib, a.sgemm_strided_batched, RELPOS_CUBLAS_NAME(cublasSgemmStridedBatched));
    resolve(lib, a.dgemm_strided_batched, RELPOS_CUBLAS_NAME(cublasDgemmStridedBatched));
    resolve(lib, a.gemm_strided_batched_ex, RELPOS_CUBLAS_NAME(cublasGemmStridedBatchedEx));
    api = a;
    loaded = true;
  }
  return api;
}

}  // namespace relpos::k::cuda::dev
