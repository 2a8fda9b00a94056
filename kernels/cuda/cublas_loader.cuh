// kernels/cuda/cublas_loader.cuh — cuBLAS loaded on its first use (dlopen), not at program start.
// Linking libcublas costs every process ~150 MB of resident memory before main() (the
// relocations of libcublas and libcublasLt): a CPU-only run of a CUDA build held 213 MB at
// its peak, 63 MB without it (bench/RESULTS.md). relpos calls six cuBLAS entry points; they are
// resolved here the first time a CUDA GEMM (or `relpos info`) needs them. The library is looked
// for at the path the build found (RELPOS_CUBLAS_LIBRARY), then by its soname
// (libcublas.so.<major of the headers>) on the loader's search path.
#pragma once
#include <cublas_v2.h>

namespace relpos::k::cuda::dev {

struct CublasApi {
  decltype(&cublasCreate) create;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasGetProperty) get_property;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched;
  decltype(&cublasDgemmStridedBatched) dgemm_strided_batched;
  // (the exported C function; cublas_api.h adds a C++ overload with a cudaDataType compute type)
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                            const void*, const void*, cudaDataType, int, long long int, const void*,
                                            cudaDataType, int, long long int, const void*, void*, cudaDataType, int,
                                            long long int, int, cublasComputeType_t, cublasGemmAlgo_t);
};

// The entry points, loaded on the first call (thread-safe); throws relpos::Error naming the
// library and dlerror() when it or a symbol cannot be loaded.
const CublasApi& cublas();

}  // namespace relpos::k::cuda::dev
