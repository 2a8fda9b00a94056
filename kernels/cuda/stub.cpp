// kernels/cuda/stub.cpp — the CUDA backend of a build without nvcc, generated from
// kernels/op_table.inc: every op refuses with a message saying so, and supports() says no
// to everything. Builds with nvcc compile kernels/cuda/*.cu and *.cpp instead.
#include "kernels/backend.h"

// The generated entries name their parameters (the table's parameter lists) and use none.
#pragma GCC diagnostic ignored "-Wunused-parameter"

namespace relpos::k::cuda {

namespace {
[[noreturn]] void no_cuda(const char* op) {
  fail("{}: this relpos was built without CUDA support (rebuild with nvcc and -DRELPOS_CUDA=ON)", op);
}
}  // namespace

#define RELPOS_OP(ret, name, params, args, devices) \
  ret name params {                                 \
    no_cuda(#name);                                 \
  }
#define RELPOS_OP_PLAN(ret, name, params, args, devices, Plan, bparams, bargs) \
  ret name bparams {                                                           \
    no_cuda(#name);                                                            \
  }
#include "kernels/op_table.inc"

bool supports(Op, DType) {
  return false;
}

}  // namespace relpos::k::cuda

namespace relpos::k {
std::string cuda_library_info() { return "built without CUDA support"; }
}  // namespace relpos::k
