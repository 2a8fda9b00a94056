// kernels/cuda/matmul.cu — GEMM through cuBLAS (strided batched, transpose flags), loaded on
// first use (kernels/cuda/cublas_loader.cuh). One cuBLAS handle per device, created lazily. cuBLAS is column-major; a
// row-major product C = A B is computed as C^T = B^T A^T, so the operands are passed swapped: a row-major (NoTrans)
// operand read column-major is its transpose (CUBLAS_OP_N), a column-major (transposed view) operand needs CUBLAS_OP_T.
// TF32 is used for float32 only when allowed.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <mutex>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cublas_loader.cuh"

namespace relpos::k::cuda::dev {

namespace {

const char* cublas_status(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

#define RELPOS_CUBLAS_CHECK(call)                                                   \
  do {                                                                              \
    cublasStatus_t relpos_st_ = (call);                                             \
    if (relpos_st_ != CUBLAS_STATUS_SUCCESS) throw_error("matmul", #call, cublas_status(relpos_st_)); \
  } while (0)

constexpr int kMaxDevices = 64;

cublasHandle_t handle() {
  static std::mutex mu;
  static cublasHandle_t handles[kMaxDevices] = {};
  int dev = 0;
  RELPOS_CUDA_CHECK("matmul", cudaGetDevice(&dev));
  if (dev < 0 || dev >= kMaxDevices) throw_error("matmul", "cudaGetDevice", "device index out of range");
  std::lock_guard<std::mutex> lock(mu);
  if (!handles[dev])
    RELPOS_CUBLAS_CHECK(cublas().create(&handles[dev]));  // never destroyed: lives as long as the process
  return handles[dev];
}

int as_int(int64_t v) {
  if (v < 0 || v > INT_MAX) throw_error("matmul", "size check", "a dimension, leading dimension or batch exceeds INT_MAX");
  return int(v);
}

}  // namespace

namespace {
__global__ void to_half_kernel(int half, void* dst, const float* src, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if (half == 1) static_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16_rn(src[i]);
    else static_cast<__half*>(dst)[i] = __float2half_rn(src[i]);
  }
}
}  // namespace

void to_half(int half, void* dst, const float* src, int64_t n) {
  if (n == 0) return;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65535);
  to_half_kernel<<<unsigned(blocks), threads>>>(half, dst, src, n);
  RELPOS_CUDA_CHECK("matmul", cudaGetLastError());
}

void gemm(DT t, bool allow_tf32, int64_t M, int64_t N, int64_t K, const GemmOperand& a, const GemmOperand& b,
          void* c, int64_t ldc, int64_t c_stride, int64_t batch, int half) {
  if (M == 0 || N == 0 || K == 0 || batch == 0) return;  // the host handles K == 0 (zeros)
  cublasHandle_t h = handle();
  const cublasOperation_t opa = a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opb = b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  // column-major: C^T [N, M] = op(B^T) [N, K] @ op(A^T) [K, M]
  if (half != 0 && t == DT::F32) {
    // 16-bit operands, float32 output and accumulation (CUBLAS_COMPUTE_32F: never a 16-bit
    // accumulator); tensor cores where the sizes allow
    RELPOS_CUBLAS_CHECK(cublas().set_math_mode(h, CUBLAS_DEFAULT_MATH));
    const cudaDataType_t in = half == 1 ? CUDA_R_16BF : CUDA_R_16F;
    const float one = 1.0f, zero = 0.0f;
    RELPOS_CUBLAS_CHECK(cublas().gemm_strided_batched_ex(h, opb, opa, as_int(N), as_int(M), as_int(K), &one, b.data, in,
                                                         as_int(b.ld), b.batch_stride, a.data, in, as_int(a.ld),
                                                         a.batch_stride, &zero, c, CUDA_R_32F, as_int(ldc), c_stride,
                                                         as_int(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else if (t == DT::F32) {
    RELPOS_CUBLAS_CHECK(cublas().set_math_mode(h, allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    const float one = 1.0f, zero = 0.0f;
    RELPOS_CUBLAS_CHECK(cublas().sgemm_strided_batched(
        h, opb, opa, as_int(N), as_int(M), as_int(K), &one, static_cast<const float*>(b.data), as_int(b.ld),
        b.batch_stride, static_cast<const float*>(a.data), as_int(a.ld), a.batch_stride, &zero, static_cast<float*>(c),
        as_int(ldc), c_stride, as_int(batch)));
  } else if (t == DT::F64) {
    RELPOS_CUBLAS_CHECK(cublas().set_math_mode(h, CUBLAS_DEFAULT_MATH));
    const double one = 1.0, zero = 0.0;
    RELPOS_CUBLAS_CHECK(cublas().dgemm_strided_batched(
        h, opb, opa, as_int(N), as_int(M), as_int(K), &one, static_cast<const double*>(b.data), as_int(b.ld),
        b.batch_stride, static_cast<const double*>(a.data), as_int(a.ld), a.batch_stride, &zero,
        static_cast<double*>(c), as_int(ldc), c_stride, as_int(batch)));
  } else {
    throw_error("matmul", "dtype switch", "int64 matmul is not supported");
  }
}

}  // namespace relpos::k::cuda::dev
