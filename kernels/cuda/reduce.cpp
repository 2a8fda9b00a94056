// kernels/cuda/reduce.cpp — CUDA entry points of reduce and sum_squares. As on the CPU
// (kernels/cpu/reduce.cpp), the input is permuted so kept dims come first and reduced dims
// last and made contiguous; reduce.cu then reduces each row with one block. Two special
// cases (sum and mean): the leading dims of a contiguous tensor are summed as columns in
// place (reduce_cols), and a large full reduction runs in two passes (reduce_all).
#include <algorithm>

#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

static_assert(int(Reduce::Sum) == 0 && int(Reduce::Mean) == 1 && int(Reduce::Max) == 2 && int(Reduce::Min) == 3 &&
              int(Reduce::LogSumExp) == 4 && int(Reduce::Var) == 5);

// x: any shape; plan (check::reduce): x.permute(plan.order) is [rows, R] -> out plan.out_shape.
Tensor reduce(const ReducePlan& plan, Reduce op, const Tensor& x, int64_t correction) {
  const int64_t rows = plan.rows, R = plan.R;
  Tensor out = empty_cuda(plan.out_shape, x.dtype());
  const bool sum_like = op == Reduce::Sum || op == Reduce::Mean;
  // Sum / mean over the leading dims of a contiguous tensor (a bias gradient, sum_to): column
  // sums in place, no transposed copy.
  if (sum_like && plan.leading && x.is_contiguous()) {
    Tensor part = empty_cuda({std::max<int64_t>(dev::col_chunks(R), 1), rows}, DType::F64);
    dev::reduce_cols(int(op), dt(x.dtype()), out.raw_data(), x.raw_data(), R, rows, part.data<double>());
    return out;
  }
  Tensor xp = (x.dim() == 0 ? x : x.permute(plan.order)).contiguous();  // [rows, R]
  // A large full reduction: every multiprocessor, then one block.
  if (sum_like && rows == 1 && R > 8192) {
    Tensor partial = empty_cuda({dev::all_chunks(R)}, DType::F64);
    dev::reduce_all(int(op), dt(x.dtype()), out.raw_data(), xp.raw_data(), R, partial.data<double>());
    return out;
  }
  dev::reduce_rows(int(op), dt(x.dtype()), out.raw_data(), xp.raw_data(), rows, R, correction);
  return out;
}

Tensor sum_squares(const Tensor& x_in) {
  const Tensor x = x_in.contiguous();
  const int64_t n = x.numel();
  Tensor partial = empty_cuda({std::max<int64_t>(dev::sum_squares_chunks(n), 1)}, DType::F64);
  Tensor out = empty_cuda({}, DType::F64);
  dev::sum_squares(dt(x.dtype()), out.data<double>(), x.raw_data(), n, partial.data<double>());
  return out;
}

}  // namespace relpos::k::cuda
