// autograd/ops/shape.cpp — view ops (no copy in forward) and cat/split. Backward maps the
// gradient back to the input's layout: reshape back, transpose back, inverse permutation,
// zero-pad for narrow/select, sum over broadcast dims for expand, slice for cat.
#include "autograd/function.h"
#include "autograd/ops.h"

namespace relpos {

Variable reshape(const Variable& x, const Shape& shape) {
  Shape in = x.shape();
  return make_result(x.data().reshape(shape), "reshape", {x},
                     [in](const Tensor& g) -> std::vector<Tensor> { return {g.reshape(in)}; });
}

Variable transpose(const Variable& x, int64_t a, int64_t b) {
  return make_result(x.data().transpose(a, b), "transpose", {x},
                     [a, b](const Tensor& g) -> std::vector<Tensor> { return {g.transpose(a, b)}; });
}

Variable permute(const Variable& x, const std::vector<int64_t>& order) {
  Tensor y = x.data().permute(order);
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[wrap_dim(order[i], x.dim(), "permute")] = int64_t(i);
  return make_result(y, "permute", {x},
                     [inverse](const Tensor& g) -> std::vector<Tensor> { return {g.permute(inverse)}; });
}

Variable narrow(const Variable& x, int64_t dim, int64_t start, int64_t length) {
  Shape in = x.shape();
  return make_result(x.data().narrow(dim, start, length), "narrow", {x},
                     [in, dim, start, length](const Tensor& g) -> std::vector<Tensor> {
                       Tensor dx = Tensor::zeros(in, g.dtype(), g.device());
                       dx.narrow(dim, start, length).copy_(g);
                       return {dx};
                     });
}

Variable select(const Variable& x, int64_t dim, int64_t index) {
  Shape in = x.shape();
  return make_result(x.data().select(dim, index), "select", {x},
                     [in, dim, index](const Tensor& g) -> std::vector<Tensor> {
                       Tensor dx = Tensor::zeros(in, g.dtype(), g.device());
                       dx.select(dim, index).copy_(g);
                       return {dx};
                     });
}

Variable expand(const Variable& x, const Shape& shape) {
  Shape in = x.shape();
  return make_result(x.data().expand(shape), "expand", {x},
                     [in](const Tensor& g) -> std::vector<Tensor> { return {k::sum_to(g, in)}; });
}

Variable unsqueeze(const Variable& x, int64_t dim) {
  Shape in = x.shape();
  return make_result(x.data().unsqueeze(dim), "unsqueeze", {x},
                     [in](const Tensor& g) -> std::vector<Tensor> { return {g.reshape(in)}; });
}

Variable squeeze(const Variable& x, int64_t dim) {
  Shape in = x.shape();
  return make_result(x.data().squeeze(dim), "squeeze", {x},
                     [in](const Tensor& g) -> std::vector<Tensor> { return {g.reshape(in)}; });
}

Variable contiguous(const Variable& x) {
  return make_result(x.data().contiguous(), "contiguous", {x},
                     [](const Tensor& g) -> std::vector<Tensor> { return {g}; });
}

Variable cat(const std::vector<Variable>& xs, int64_t dim) {
  std::vector<Tensor> ts;
  std::vector<int64_t> sizes;
  for (const Variable& x : xs) {
    ts.push_back(x.data());
    sizes.push_back(x.data().dim() > 0 ? x.size(wrap_dim(dim, x.dim(), "cat")) : 0);
  }
  return make_result(k::cat(ts, dim), "cat", xs, [sizes, dim](const Tensor& g) -> std::vector<Tensor> {
    return k::split(g, sizes, dim);
  });
}

std::vector<Variable> split(const Variable& x, const std::vector<int64_t>& sizes, int64_t dim) {
  std::vector<Variable> out;
  int64_t at = 0;
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  RELPOS_CHECK(total == x.size(dim), "split: sizes add up to {}, dim {} of {} has {}", total, dim,
               shape_str(x.shape()), x.size(dim));
  for (int64_t s : sizes) {
    out.push_back(narrow(x, dim, at, s));
    at += s;
  }
  return out;
}

}  // namespace relpos
