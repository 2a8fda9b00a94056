// autograd/ops/index.cpp — gathers and their scatter-add backwards.
//   embedding:    y[..., :] = W[idx[...], :]          dW[r] = sum_{idx == r} g
//   index_select: y = x.index_select(dim, idx)        dx = index_add(zeros, dim, idx, g)
//   gather:       y[i][j] = x[i][idx[i][j]] (dim 1)    dx = scatter_add(zeros, dim, idx, g)
#include "autograd/function.h"
#include "autograd/ops.h"

namespace relpos {

Variable embedding(const Variable& weight, const Tensor& idx) {
  Tensor i = idx;
  int64_t rows = weight.size(0);
  return make_result(k::embedding(weight.data(), idx), "embedding", {weight},
                     [i, rows](const Tensor& g) -> std::vector<Tensor> {
                       return {k::embedding_backward(g, i, rows)};
                     });
}

Variable index_select(const Variable& x, int64_t dim, const Tensor& idx) {
  Tensor i = idx;
  Shape in = x.shape();
  return make_result(k::index_select(x.data(), dim, idx), "index_select", {x},
                     [i, in, dim](const Tensor& g) -> std::vector<Tensor> {
                       return {k::index_add(in, dim, i, g)};
                     });
}

Variable gather(const Variable& x, int64_t dim, const Tensor& idx) {
  Tensor i = idx;
  Shape in = x.shape();
  return make_result(k::gather(x.data(), dim, idx), "gather", {x},
                     [i, in, dim](const Tensor& g) -> std::vector<Tensor> {
                       return {k::scatter_add(in, dim, i, g)};
                     });
}

Variable scatter_add(const Shape& shape, int64_t dim, const Tensor& idx, const Variable& src) {
  Tensor i = idx;
  return make_result(k::scatter_add(shape, dim, idx, src.data()), "scatter_add", {src},
                     [i, dim](const Tensor& g) -> std::vector<Tensor> { return {k::gather(g, dim, i)}; });
}

}  // namespace relpos
