// kernels/cpu/gemm.h — the one place a CPU GEMM is chosen (kernels/cpu/gemm.cpp).
//
// C[M, N] = op(A)[M, K] · op(B)[K, N], row-major, op = transpose when the flag says so (A is
// then stored [K, M] with leading dim lda), C overwritten (beta = 0), float32 accumulation.
//   float32, inputs F32:   oneDNN's matmul (brgemm, the CPU's widest float32 unit) when relpos
//                          was built with oneDNN (RELPOS_WITH_DNNL), else OpenBLAS sgemm;
//   float32, inputs BF16:  the operands are rounded to bfloat16 (nearest even) while they are
//                          packed, and multiplied on the CPU's bf16 units (AVX512-BF16 / AMX
//                          through oneDNN) with float32 accumulation; without such units (or
//                          oneDNN), rounded float32 copies go to the float32 path;
//   float32, inputs FP16:  rounded-to-float16 copies on the float32 path (oneDNN 2.6 has no CPU
//                          float16 matmul);
//   float64:               OpenBLAS dgemm.
//   round_output (BF16 / FP16 inputs): C is rounded to bf16 / fp16 (nearest even) block of rows
//                          by block of rows, each right after its GEMM while it is in cache
//                          (blocks of ~1 MiB of C, at least 64 rows): no second pass over C.
//   epilogue.bias ([N], nullptr = none): added to every row of C after the rounding, in the same
//                          blocks (the epilogue of a linear layer): C = round(A B) + bias.
//   epilogue.act (an activation, kernels/ops.h is_activation): applied last, in the same blocks:
//                          C = act(pre), pre = round(A B) + bias; with epilogue.act_grad set,
//                          act'(pre) is written there first ([M, N], leading dim ldg) — the
//                          values of k::unary / k::unary(derivative_of(act)) on pre.
//   epilogue.mul ([M, N], leading dim ldg; nullptr = none): C is multiplied by it elementwise,
//                          last, in the same blocks (k::matmul_mul).
//   epilogue.add ([M, N], leading dim ldg; nullptr = none): added to C elementwise, last, in the
//                          same blocks (k::matmul_add: a residual around a linear layer).
//   epilogue.a_sums ([M], nullptr = none): the sums of op(A)'s rows along K, of A's float32
//                          values (not rounded to 16 bits), accumulated in float64 and rounded
//                          once; on the oneDNN path each K chunk's part is summed by the thread
//                          that multiplies the chunk, while the chunk is in its cache
//                          (k::matmul_sums: dW = g^T x and db = the sums of g^T).
// RELPOS_GEMM=openblas forces OpenBLAS for float32 (and bf16 inputs): a switch for benchmarks
// and for bisecting a numerical difference, read once.
// RELPOS_GEMM_PROFILE=1 times every call of gemm_f32 / gemm_f64 and prints, at process exit (on
// stderr), one Markdown row per (inputs, layout, M, N, K, epilogue): calls, ms, GFLOP/s. A
// profiler's view of the GEMMs, which perf cannot unwind (oneDNN's JIT code); read once.
// Determinism: the result of a given call is the same at every thread count. oneDNN may split
// K across threads (a parallel reduction whose order follows the thread count) when K > 1024 and
// there is little M x N work; relpos therefore never hands it a K above 1024: longer products run
// as a fixed sequence of K chunks, each multiplied by one thread (the chunks on the threads at
// once), added into C in order (kernels/cpu/gemm.cpp onednn_product). With more threads than
// chunks the others wait during such a product (K = 2048 uses two threads): the price of the
// guarantee. OpenBLAS (RELPOS_GEMM=openblas, or a build without oneDNN) gives no such guarantee:
// its float32 products with small M x N and a long K changed bits between 1, 2 and 3 threads
// (48 x 40, K = 3000; tests/kernels/test_gemm.cpp runs on oneDNN).
#pragma once
#include <cstdint>
#include <string>

#include "kernels/ops.h"

namespace relpos::k::cpu {

// What a GEMM does to each block of C's rows after its product (see above).
template <typename T>
struct GemmEpilogue {
  const T* bias = nullptr;  // [N]
  bool has_act = false;
  Unary act = Unary::Relu;  // when has_act
  T* act_grad = nullptr;    // [M, N] with leading dim ldg, or nullptr
  int64_t ldg = 0;
  const T* mul = nullptr;  // [M, N] with leading dim ldg (C's), or nullptr: C *= mul last
  // Not a step on C but a by-product of reading A: a_sums[m] = the sum of op(A)'s row m along K
  // ([M]; nullptr = none) — a linear layer's bias gradient beside its weight gradient (k::matmul_sums).
  T* a_sums = nullptr;
  const T* add = nullptr;  // [M, N] with leading dim ldg (C's), or nullptr: C += add last (a residual)
};

void gemm_f32(GemmInputs inputs, bool round_output, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
              const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
              const GemmEpilogue<float>& epilogue = {});
void gemm_f64(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const double* a, int64_t lda,
              const double* b, int64_t ldb, double* c, int64_t ldc, const GemmEpilogue<double>& epilogue = {});

}  // namespace relpos::k::cpu
