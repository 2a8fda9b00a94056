// autograd/autocast.h — mixed precision (train.precision): 16-bit values in float32 storage.
//
// Under an AutocastGuard(bf16 | fp16), every float32 matmul (autograd `matmul`) and the fused
// attention's q, k, v and output take the values a 16-bit tensor would hold: inputs and output
// are rounded to bfloat16 / float16 (round to nearest even; float16 overflows to inf above
// 65504), products accumulate in float32 (as tensor cores and oneDNN do), and the gradients that
// flow back through those points are rounded the same way (PyTorch's autocast runs the backward
// of a 16-bit op in 16 bits). Everything else — softmax statistics, norms, the loss, reductions,
// the optimizer and the master weights — stays float32, the policy of PyTorch's autocast.
// The storage stays float32: this reproduces 16-bit numerics (rounding, fp16 overflow and
// underflow) on any machine. The matmuls' GEMMs are the exception that pays: they are told the
// precision (k::GemmInputs, gemm_inputs below), round their operands themselves and run on the
// hardware's 16-bit units where it has them (autograd/ops/matmul.cpp, kernels/cpu/gemm.h).
#pragma once
#include "autograd/variable.h"
#include "core/enum_names.h"
#include "kernels/ops.h"

namespace relpos {

enum class Precision { FP32, BF16, FP16 };

Precision autocast_precision();  // of this thread; FP32 = autocast off

class AutocastGuard {
 public:
  explicit AutocastGuard(Precision p);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  Precision prev_;
};

// What a GEMM's operands hold under precision p (k::GemmInputs: F32, BF16, FP16).
k::GemmInputs gemm_inputs(Precision p);

// x as a 16-bit copy would hold it (forward) with its gradient rounded the same way
// (backward). The identity under FP32 and for tensors that are not float32.
Variable autocast_round(const Variable& x);

}  // namespace relpos

template <>
struct relpos::EnumTable<relpos::Precision> {
  static constexpr EnumName<Precision> items[] = {
      {Precision::FP32, "fp32"}, {Precision::BF16, "bf16"}, {Precision::FP16, "fp16"}};
};
