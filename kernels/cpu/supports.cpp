// kernels/cpu/supports.cpp — what the CPU backend has kernels for: every op of
// kernels/op_table.inc in float32 and float64, int64 data where takes_int64() says so.
#include "kernels/backend.h"

namespace relpos::k::cpu {

bool supports(Op op, DType dtype) {
  return is_floating(dtype) || takes_int64(op);
}

}  // namespace relpos::k::cpu
