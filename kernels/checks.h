// kernels/checks.h — the argument checks of every raw op, one function per line of
// kernels/op_table.inc with the op's own parameters: check::matmul(a, b), ... An op with a
// plan (RELPOS_OP_PLAN, kernels/plans.h) returns it: the shapes the backend needs. The generated
// forwarders of kernels/dispatch.cpp call it after the device check and before the backend,
// so every backend sees arguments of valid shape and dtype and the messages are the same
// whichever device the inputs are on. Definitions: kernels/checks.cpp.
#pragma once
#include "kernels/ops.h"
#include "kernels/plans.h"

namespace relpos::k::check {
#define RELPOS_OP(ret, name, params, args, devices) void name params;
#define RELPOS_OP_PLAN(ret, name, params, args, devices, Plan, bparams, bargs) Plan name params;
#include "kernels/op_table.inc"
}  // namespace relpos::k::check
