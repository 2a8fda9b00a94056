// kernels/plans.cpp — the shape plans of kernels/plans.h.
#include "kernels/plans.h"

#include <algorithm>

namespace relpos::k {

ReducePlan plan_reduce(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  ReducePlan p;
  const int64_t nd = x.dim();
  p.reduced.assign(size_t(std::max<int64_t>(nd, 1)), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, nd, "reduce");
    RELPOS_CHECK(!p.reduced[size_t(w)], "reduce: dim {} listed twice", d);
    p.reduced[size_t(w)] = true;
  }
  Shape kept;
  for (int64_t d = 0; d < nd; ++d) {
    if (!p.reduced[size_t(d)]) {
      p.order.push_back(d);
      kept.push_back(x.size(d));
    }
    if (keepdim) p.out_shape.push_back(p.reduced[size_t(d)] ? 1 : x.size(d));
  }
  for (int64_t d = 0; d < nd; ++d)
    if (p.reduced[size_t(d)]) {
      p.order.push_back(d);
      p.R *= x.size(d);
    }
  if (!keepdim) p.out_shape = kept;
  p.rows = numel_of(kept);
  int64_t lead = 0;
  while (lead < nd && p.reduced[size_t(lead)]) ++lead;
  p.leading = lead > 0 && lead < nd && p.rows > 1;
  for (int64_t d = lead; p.leading && d < nd; ++d) p.leading = !p.reduced[size_t(d)];
  return p;
}

MatmulPlan plan_matmul(const Tensor& a, const Tensor& b, const char* op) {
  RELPOS_CHECK(a.dim() >= 2 && b.dim() >= 2, "{}: both operands need at least 2 dims, got {} and {}", op,
               shape_str(a.shape()), shape_str(b.shape()));
  MatmulPlan p;
  p.M = a.size(-2), p.K = a.size(-1), p.N = b.size(-1);
  RELPOS_CHECK(b.size(-2) == p.K, "{}: inner dims differ: {} @ {} ({} vs {})", op, shape_str(a.shape()),
               shape_str(b.shape()), p.K, b.size(-2));
  Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  // Equal batch dims (every 2D and most batched products) need no broadcast, nor its error label.
  p.batch = ba == bb ? std::move(ba) : broadcast_shapes(ba, bb, (std::string(op) + " (batch dims)").c_str());
  p.batches = numel_of(p.batch);
  p.out_shape = p.batch;
  p.out_shape.push_back(p.M);
  p.out_shape.push_back(p.N);
  return p;
}

bool operand_layout(const Tensor& t, OperandLayout& m) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const int64_t rs = t.strides()[size_t(t.dim() - 2)], cs = t.strides()[size_t(t.dim() - 1)];
  if ((cs == 1 || cols == 1) && rs >= std::max<int64_t>(cols, 1)) {
    m = {false, rows == 1 ? std::max<int64_t>(cols, 1) : rs};
    return true;
  }
  if ((rs == 1 || rows == 1) && cs >= std::max<int64_t>(rows, 1)) {
    m = {true, cols == 1 ? std::max<int64_t>(rows, 1) : cs};
    return true;
  }
  return false;
}

RowsPlan plan_rows(const Tensor& x, int64_t dim, const char* op) {
  RowsPlan p;
  p.dim = wrap_dim(dim, x.dim(), op);
  p.last = std::max<int64_t>(x.dim() - 1, 0);
  p.n = x.dim() == 0 ? 1 : x.size(p.dim);
  p.rows = p.n == 0 ? 0 : x.numel() / p.n;
  return p;
}

}  // namespace relpos::k
