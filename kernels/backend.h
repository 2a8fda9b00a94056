// kernels/backend.h — the backends behind kernels/ops.h. Each backend namespace declares the
// same contract, generated from kernels/op_table.inc (one entry per op, the public op's
// signature, or for an op with a plan its plan first: kernels/plans.h), plus supports();
// kernels/dispatch.cpp is the only caller. A backend entry gets inputs that are all on its
// device, with shapes and dtypes kernels/checks.cpp has checked.
//   k::cpu  — kernels/cpu/*.cpp: OpenBLAS GEMM + OpenMP loops (core/strided.h)
//   k::cuda — kernels/cuda/*.cu: cuBLAS + CUDA kernels; kernels/cuda/stub.cpp when built
//             without nvcc (every entry throws "built without CUDA support")
#pragma once
#include "kernels/ops.h"
#include "kernels/plans.h"

namespace relpos::k {

// The ops whose kernels take int64 data as well as float32/float64, on every backend.
constexpr bool takes_int64(Op op) {
  return op == Op::binary || op == Op::where || op == Op::index_select;
}

// An on/off environment switch of the kernels (RELPOS_GEMM_PROFILE, RELPOS_OP_PROFILE): off when
// unset, empty or "0", on for "1", anything else an error naming the variable and its value.
bool env_switch(const char* name);

// Milliseconds on the steady clock, for the profiles' timings.
double steady_ms();

}  // namespace relpos::k

namespace relpos::k::cpu {
#define RELPOS_OP(ret, name, params, args, devices) ret name params;
#define RELPOS_OP_PLAN(ret, name, params, args, devices, Plan, bparams, bargs) ret name bparams;
#include "kernels/op_table.inc"
bool supports(Op op, DType dtype);  // kernels/cpu/supports.cpp
void restart_gemm_profile();        // kernels/cpu/gemm.cpp: RELPOS_GEMM_PROFILE's rows forgotten (k::restart_profiles)
}  // namespace relpos::k::cpu

namespace relpos::k::cuda {
#define RELPOS_OP(ret, name, params, args, devices) ret name params;
#define RELPOS_OP_PLAN(ret, name, params, args, devices, Plan, bparams, bargs) ret name bparams;
#include "kernels/op_table.inc"
bool supports(Op op, DType dtype);  // kernels/cuda/supports.cpp, or stub.cpp
}  // namespace relpos::k::cuda
