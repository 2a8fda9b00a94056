// kernels/composite.cpp — public ops that are compositions of other ops (or pure views), so
// they run on every device without a backend kernel of their own.
#include "kernels/ops.h"

namespace relpos::k {

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_defined(x, "masked_fill", "input");
  check_defined(mask, "masked_fill", "mask");
  Shape shape = broadcast_shapes(x.shape(), mask.shape(), "masked_fill");
  RELPOS_CHECK(shape == x.shape(), "masked_fill: mask {} does not broadcast to input {}", shape_str(mask.shape()),
               shape_str(x.shape()));
  // The scalar is made on x's device (a fill kernel taking the value by value): no upload.
  return where(mask, Tensor::scalar(value, x.dtype(), x.device()), x);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - int64_t(shape.size());
  RELPOS_CHECK(lead >= 0, "sum_to: cannot reduce {} to the larger rank {}", shape_str(x.shape()), shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
      continue;
    }
    int64_t want = shape[d - lead];
    RELPOS_CHECK(want == x.size(d) || want == 1, "sum_to: {} is not a broadcast of {}", shape_str(x.shape()),
                 shape_str(shape));
    if (want == 1 && x.size(d) != 1) dims.push_back(d);
  }
  if (dims.empty()) return x.reshape(shape);
  return reduce(Reduce::Sum, x, dims, true).reshape(shape);
}

// out[..., at:at+n_i, ...] = xs[i]: one strided copy per input (Tensor::copy_ runs on the
// tensors' device).
Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  RELPOS_CHECK(!xs.empty(), "cat: needs at least one tensor");
  const Tensor& x0 = xs[0];
  check_defined(x0, "cat", "tensor 0");
  dim = wrap_existing_dim(dim, x0.dim(), "cat");
  Shape out_shape = x0.shape();
  out_shape[dim] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    check_same_dtype_device(x0, xs[i], "cat");
    RELPOS_CHECK(xs[i].dim() == x0.dim(), "cat: tensor {} has shape {}, tensor 0 has {}", i,
                 shape_str(xs[i].shape()), shape_str(x0.shape()));
    for (int64_t d = 0; d < x0.dim(); ++d)
      RELPOS_CHECK(d == dim || xs[i].size(d) == x0.size(d),
                   "cat: tensor {} has shape {}, tensor 0 has {} (must match except at dim {})", i,
                   shape_str(xs[i].shape()), shape_str(x0.shape()), dim);
    out_shape[dim] += xs[i].size(dim);
  }
  Tensor out = Tensor::empty(out_shape, x0.dtype(), x0.device());
  int64_t at = 0;
  for (const Tensor& x : xs) {
    out.narrow(dim, at, x.size(dim)).copy_(x);
    at += x.size(dim);
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  dim = wrap_existing_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    RELPOS_CHECK(s >= 0, "split: negative size {}", s);
    total += s;
  }
  RELPOS_CHECK(total == x.size(dim), "split: sizes add up to {}, dim {} of {} has {}", total, dim,
               shape_str(x.shape()), x.size(dim));
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(x.narrow(dim, at, s));
    at += s;
  }
  return out;
}

}  // namespace relpos::k
