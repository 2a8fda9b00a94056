// kernels/plans.h — what an op's argument check works out about its shapes, handed by the
// dispatch layer to the backend: the output shape, the reduced and broadcast dims, the row
// counts. kernels/op_table.inc names an op's plan (RELPOS_OP_PLAN); check::<op> returns it
// (kernels/checks.cpp) and every backend's entry takes it as its first argument, so no backend
// recomputes a shape the check already derived, and the backends cannot disagree about one.
#pragma once
#include <vector>

#include "core/tensor.h"

namespace relpos::k {

// reduce(op, x, dims, keepdim): x viewed as [rows, R] after x.permute(order).
struct ReducePlan {
  std::vector<bool> reduced;   // per dim of x (one entry, true, for a 0-d x)
  std::vector<int64_t> order;  // the kept dims, then the reduced ones
  Shape out_shape;             // the result's shape (reduced dims as 1 when keepdim)
  int64_t rows = 1;            // output elements (the kept dims' product)
  int64_t R = 1;               // elements reduced into each output element
  bool leading = false;        // the reduced dims are x's first dims and rows > 1: for a contiguous
                               // x, [R, rows] column sums in place (bias gradients)
};
// dims empty: every dim. Throws on a dim out of range or listed twice.
ReducePlan plan_reduce(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim);

// matmul and its epilogue forms: a [..., M, K] @ b [..., K, N] -> [batch..., M, N].
struct MatmulPlan {
  int64_t M = 0, K = 0, N = 0;
  Shape batch;      // a's and b's batch dims broadcast
  Shape out_shape;  // batch + [M, N]
  int64_t batches = 1;
  bool empty() const { return K == 0 || batches * M * N == 0; }  // a product of zeros (or nothing)
};
// Throws when a or b has fewer than 2 dims, the inner dims differ or the batch dims do not
// broadcast (op names the caller in the message).
MatmulPlan plan_matmul(const Tensor& a, const Tensor& b, const char* op = "matmul");

// How a GEMM reads the last two dims of t (rows x cols) in place: row-major (stride[-1] == 1)
// as NoTrans, column-major (stride[-2] == 1, a transposed view) as Trans, with leading
// dimension ld. False: neither (the caller copies t once).
struct OperandLayout {
  bool trans = false;
  int64_t ld = 0;
};
bool operand_layout(const Tensor& t, OperandLayout& m);

// The softmax family along dim: x moved to [rows, n] with dim last.
struct RowsPlan {
  int64_t dim = 0;   // wrapped
  int64_t last = 0;  // x's last dim (0 for a 0-d x)
  int64_t n = 1;     // x.size(dim) (1 for a 0-d x)
  int64_t rows = 0;  // x.numel() / n (0 when n == 0)
};
RowsPlan plan_rows(const Tensor& x, int64_t dim, const char* op);

}  // namespace relpos::k
