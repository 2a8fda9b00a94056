// kernels/op_table.h — what kernels/op_table.inc generates for every user of kernels/ops.h:
// k::Op (one enumerator per raw op, in table order), k::op_names (their names) and
// k::supports(device, op, dtype), the question a caller asks before choosing a path that
// needs a backend kernel (nn/attention.cpp asks it for the fused attention kernel).
#pragma once
#include <array>
#include <cstddef>
#include <string_view>

#include "core/tensor.h"

namespace relpos::k {

enum class Op {
#define RELPOS_OP(ret, name, params, args, devices) name,
#include "kernels/op_table.inc"
};

// The name of every op, indexed by int(Op): "matmul", "attention_backward", ...
inline constexpr std::array op_names = {
#define RELPOS_OP(ret, name, params, args, devices) std::string_view(#name),
#include "kernels/op_table.inc"
};
inline constexpr size_t num_ops = op_names.size();
constexpr std::string_view op_name(Op op) {
  return op_names[size_t(op)];
}

// Whether device's backend has a kernel for op on data of dtype (the dtype of the op's
// values: floating inputs, or an int64 tensor the op copies or compares). Every backend
// runs float32 and float64; int64 data only binary, where and index_select. The CUDA backend
// has no fused attention (attention, attention_backward) and, in a build without nvcc, no
// kernel at all. An op a backend does not support throws when called there; one it
// supports does not refuse (tests/kernels/test_backend_ops.cpp checks both).
bool supports(Device device, Op op, DType dtype);

}  // namespace relpos::k
