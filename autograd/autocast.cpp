#include "autograd/autocast.h"

#include "autograd/function.h"
#include "kernels/ops.h"

namespace relpos {

namespace {
thread_local Precision g_precision = Precision::FP32;
}  // namespace

Precision autocast_precision() { return g_precision; }

AutocastGuard::AutocastGuard(Precision p) : prev_(g_precision) { g_precision = p; }
AutocastGuard::~AutocastGuard() { g_precision = prev_; }

k::GemmInputs gemm_inputs(Precision p) {
  switch (p) {
    case Precision::BF16:
      return k::GemmInputs::BF16;
    case Precision::FP16:
      return k::GemmInputs::FP16;
    case Precision::FP32:
      break;
  }
  return k::GemmInputs::F32;
}

Variable autocast_round(const Variable& x) {
  const Precision p = g_precision;
  if (p == Precision::FP32 || !x.defined() || x.dtype() != DType::F32) return x;
  const k::Unary round = p == Precision::BF16 ? k::Unary::RoundBF16 : k::Unary::RoundFP16;
  return make_result(k::unary(round, x.data()), "autocast_round", {x},
                     [round](const Tensor& g) -> std::vector<Tensor> { return {k::unary(round, g)}; });
}

}  // namespace relpos
