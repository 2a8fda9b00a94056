// autograd/ops/reduce.cpp — reductions. Backward broadcasts the output gradient back over
// the reduced dims (restore them as size 1 when !keepdim, then expand) and scales it by
// the local derivative.
#include <algorithm>

#include "autograd/function.h"
#include "autograd/ops.h"

namespace relpos {

namespace {

// Shape of the reduction output with keepdim=true (a 0-d input, whose dim 0 / -1 the
// kernel accepts, stays 0-d).
Shape keepdim_shape(const Shape& in, const std::vector<int64_t>& dims) {
  Shape s = in;
  if (dims.empty() || in.empty()) {
    std::fill(s.begin(), s.end(), 1);
    return s;
  }
  for (int64_t d : dims) s[wrap_dim(d, int64_t(in.size()), "reduce")] = 1;
  return s;
}

int64_t reduced_count(const Shape& in, const std::vector<int64_t>& dims) {
  return numel_of(in) / std::max<int64_t>(numel_of(keepdim_shape(in, dims)), 1);
}

// g (output grad) -> broadcastable against the input: [.., 1, ..] at reduced dims.
Tensor unreduce(const Tensor& g, const Shape& in, const std::vector<int64_t>& dims) {
  return g.reshape(keepdim_shape(in, dims));
}

}  // namespace

Variable sum(const Variable& x, std::vector<int64_t> dims, bool keepdim) {
  Shape in = x.shape();
  Tensor y = k::reduce(k::Reduce::Sum, x.data(), dims, keepdim);
  return make_result(y, "sum", {x}, [in, dims](const Tensor& g) -> std::vector<Tensor> {
    return {unreduce(g, in, dims).expand(in).contiguous()};
  });
}

Variable mean(const Variable& x, std::vector<int64_t> dims, bool keepdim) {
  Shape in = x.shape();
  double n = double(reduced_count(in, dims));
  Tensor y = k::reduce(k::Reduce::Mean, x.data(), dims, keepdim);
  return make_result(y, "mean", {x}, [in, dims, n](const Tensor& g) -> std::vector<Tensor> {
    return {k::unary(k::Unary::MulScalar, unreduce(g, in, dims).expand(in), 1.0 / n)};
  });
}

// dx = g * [x == max] / (number of maxima)
Variable max(const Variable& x, std::vector<int64_t> dims, bool keepdim) {
  Shape in = x.shape();
  Tensor y = k::reduce(k::Reduce::Max, x.data(), dims, keepdim);
  SavedTensor sx(x.data(), "max"), sy(y, "max");
  return make_result(y, "max", {x}, [in, dims, sx, sy](const Tensor& g) -> std::vector<Tensor> {
    Tensor is_max = k::binary(k::Binary::Eq, sx.get(), unreduce(sy.get(), in, dims));
    Tensor count = k::reduce(k::Reduce::Sum, is_max, dims, true);
    return {k::mul(is_max, k::div(unreduce(g, in, dims), count))};
  });
}

// dx = g * exp(x - lse)
Variable logsumexp(const Variable& x, std::vector<int64_t> dims, bool keepdim) {
  Shape in = x.shape();
  Tensor y = k::reduce(k::Reduce::LogSumExp, x.data(), dims, keepdim);
  SavedTensor sx(x.data(), "logsumexp"), sy(y, "logsumexp");
  return make_result(y, "logsumexp", {x}, [in, dims, sx, sy](const Tensor& g) -> std::vector<Tensor> {
    Tensor p = k::unary(k::Unary::Exp, k::sub(sx.get(), unreduce(sy.get(), in, dims)));
    return {k::mul(p, unreduce(g, in, dims))};
  });
}

// dx = g * 2 (x - mean) / (n - correction)
Variable var(const Variable& x, std::vector<int64_t> dims, bool keepdim, int64_t correction) {
  Shape in = x.shape();
  double n = double(reduced_count(in, dims));
  RELPOS_CHECK(n - double(correction) > 0, "var: {} elements with correction {} leaves no degrees of freedom",
               n, correction);
  Tensor y = k::reduce(k::Reduce::Var, x.data(), dims, keepdim, correction);
  SavedTensor sx(x.data(), "var");
  return make_result(y, "var", {x}, [in, dims, sx, n, correction](const Tensor& g) -> std::vector<Tensor> {
    Tensor m = k::reduce(k::Reduce::Mean, sx.get(), dims, true);
    Tensor centered = k::sub(sx.get(), m);
    Tensor scale = k::unary(k::Unary::MulScalar, unreduce(g, in, dims), 2.0 / (n - double(correction)));
    return {k::mul(centered, scale)};
  });
}

}  // namespace relpos
