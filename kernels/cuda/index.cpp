// kernels/cuda/index.cpp — CUDA entry points of embedding, index_select, gather and the
// scatter-adds (embedding_backward, index_add, scatter_add). Indices are copied to the host
// once per call and bounds-checked there, with the messages of kernels/cpu/index.cpp (one
// device -> host sync per call). For the scatter-adds the host also builds the CSR list of
// each output element's contributions, in the CPU's loop order; index.cu sums each list
// with one thread (deterministic, no atomics, bit-identical to the CPU).
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

namespace {

std::vector<int64_t> checked_indices(const Tensor& idx, int64_t bound, const char* op) {
  std::vector<int64_t> v = idx.to_vector<int64_t>();
  for (int64_t i : v) RELPOS_CHECK(i >= 0 && i < bound, "{}: index {} out of range [0, {})", op, i, bound);
  return v;
}

void check_float(const Tensor& t, const char* op) {
  RELPOS_CHECK(is_floating(t.dtype()), "{}: expected a floating dtype (float32 or float64), got {}", op,
               dtype_name(t.dtype()));
}

// Stable counting sort of positions 0..n-1 by key (keys in [0, nseg)): seg_begin [nseg + 1],
// perm [n] with the positions of segment s, increasing, at seg_begin[s] .. seg_begin[s+1].
struct Csr {
  std::vector<int64_t> seg_begin, perm;
};
Csr csr_by_key(const std::vector<int64_t>& key, int64_t nseg) {
  Csr c;
  c.seg_begin.assign(size_t(nseg) + 1, 0);
  for (int64_t k : key) ++c.seg_begin[size_t(k) + 1];
  for (size_t s = 0; s < size_t(nseg); ++s) c.seg_begin[s + 1] += c.seg_begin[s];
  std::vector<int64_t> next(c.seg_begin.begin(), c.seg_begin.end() - 1);
  c.perm.assign(key.size(), 0);
  for (size_t i = 0; i < key.size(); ++i) c.perm[size_t(next[size_t(key[i])]++)] = int64_t(i);
  return c;
}

// out [pre, nseg, post] = segment sums of src [pre, src_m, post] (contiguous, on the device).
Tensor segment_sum(const Shape& out_shape, const Tensor& src, const Csr& c, int64_t pre, int64_t nseg, int64_t post,
                   int64_t src_m) {
  Tensor out = empty_cuda(out_shape, src.dtype());
  if (out.numel() == 0) return out;
  Tensor sb = upload(c.seg_begin), pm = upload(c.perm);
  dev::segment_sum(dt(src.dtype()), out.raw_data(), src.raw_data(), sb.data<int64_t>(), pm.data<int64_t>(), pre, nseg,
                   post, src_m);
  return out;
}

int64_t prod(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t d = begin; d < end; ++d) p *= s[d];
  return p;
}

}  // namespace

// weight: [V, D], idx: [...] -> [..., D]
Tensor embedding(const Tensor& weight, const Tensor& idx) {
  const int64_t V = weight.size(0), D = weight.size(1);
  std::vector<int64_t> ids = checked_indices(idx, V, "embedding");
  check_float(weight, "embedding");
  Shape out_shape = idx.shape();
  out_shape.push_back(D);
  Tensor out = empty_cuda(out_shape, weight.dtype());
  Tensor w = weight.contiguous(), ic = idx.contiguous();
  dev::embedding(dt(weight.dtype()), out.raw_data(), w.raw_data(), ic.data<int64_t>(), int64_t(ids.size()), D);
  return out;
}

// gy: [..., D], idx: [...] -> [num_rows, D]; row r sums gy rows i with idx[i] == r, i increasing.
Tensor embedding_backward(const Tensor& gy, const Tensor& idx, int64_t num_rows) {
  const int64_t D = gy.size(-1);
  std::vector<int64_t> ids = checked_indices(idx, num_rows, "embedding_backward");
  RELPOS_CHECK(int64_t(ids.size()) * D == gy.numel(), "embedding_backward: grad {} does not match indices {}",
               shape_str(gy.shape()), shape_str(idx.shape()));
  check_float(gy, "embedding_backward");
  Tensor g = gy.contiguous();
  return segment_sum({num_rows, D}, g, csr_by_key(ids, num_rows), 1, num_rows, D, int64_t(ids.size()));
}

// x: [pre, n, post] (n at dim), idx: [m] -> [pre, m, post]
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& idx) {
  dim = wrap_existing_dim(dim, x.dim(), "index_select");
  std::vector<int64_t> ids = checked_indices(idx, x.size(dim), "index_select");  // any dtype, as on the CPU
  Shape out_shape = x.shape();
  out_shape[size_t(dim)] = int64_t(ids.size());
  Tensor out = empty_cuda(out_shape, x.dtype());
  if (out.numel() == 0) return out;
  Tensor xc = x.contiguous(), ic = idx.contiguous();
  dev::index_select(dt(x.dtype()), out.raw_data(), xc.raw_data(), ic.data<int64_t>(),
                    prod(x.shape(), 0, size_t(dim)), x.size(dim), int64_t(ids.size()),
                    prod(x.shape(), size_t(dim) + 1, x.shape().size()));
  return out;
}

// zeros(shape) with src slice j added at ids[j] along dim, j increasing (as the CPU's add_ loop).
Tensor index_add(const Shape& shape, int64_t dim, const Tensor& idx, const Tensor& src) {
  dim = wrap_existing_dim(dim, int64_t(shape.size()), "index_add");
  std::vector<int64_t> ids = checked_indices(idx, shape[size_t(dim)], "index_add");
  check_defined(src, "index_add", "source");
  RELPOS_CHECK(src.size(dim) == int64_t(ids.size()), "index_add: source {} has {} entries along dim {}, index has {}",
               shape_str(src.shape()), src.size(dim), dim, ids.size());
  check_float(src, "index_add");
  Shape src_shape = shape;
  src_shape[size_t(dim)] = int64_t(ids.size());
  Tensor s = src.expand(src_shape).contiguous();  // the CPU's add_ broadcasts each slice the same way
  const int64_t pre = prod(shape, 0, size_t(dim)), post = prod(shape, size_t(dim) + 1, shape.size());
  return segment_sum(shape, s, csr_by_key(ids, shape[size_t(dim)]), pre, shape[size_t(dim)], post,
                     int64_t(ids.size()));
}

namespace {

// idx values (row-major), each checked against bound with the CPU's message.
std::vector<int64_t> checked_gather_indices(const Tensor& idx, int64_t bound, int64_t dim, const char* op) {
  std::vector<int64_t> v = idx.to_vector<int64_t>();
  for (int64_t i : v)
    RELPOS_CHECK(i >= 0 && i < bound, "{}: index {} out of range [0, {}) along dim {}", op, i, bound, dim);
  return v;
}

}  // namespace

Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx) {
  dim = wrap_existing_dim(dim, x.dim(), "gather");
  Tensor out = empty_cuda(idx.shape(), x.dtype());
  if (idx.numel() == 0) return out;
  checked_gather_indices(idx, x.size(dim), dim, "gather");
  dev::gather(dt(x.dtype()), out.raw_data(), x.raw_data(), strides_of(x), idx.data<int64_t>(), strides_of(idx),
              geom(idx.shape(), "gather"), int(dim));
  return out;
}

// zeros(shape) with out[.., idx[e], ..] += src[e], elements e of idx in row-major order.
Tensor scatter_add(const Shape& shape, int64_t dim, const Tensor& idx, const Tensor& src) {
  dim = wrap_existing_dim(dim, int64_t(shape.size()), "scatter_add");
  if (idx.numel() == 0) return zeros_cuda(shape, src.dtype());
  std::vector<int64_t> v = checked_gather_indices(idx, shape[size_t(dim)], dim, "scatter_add");
  // Flat offset in the contiguous output of every idx element.
  const int64_t nd = idx.dim(), total = numel_of(shape);
  Shape ostride(size_t(nd), 1);
  for (int64_t d = nd - 2; d >= 0; --d) ostride[size_t(d)] = ostride[size_t(d) + 1] * shape[size_t(d) + 1];
  std::vector<int64_t> key(v.size());
  std::vector<int64_t> pos(size_t(nd), 0);
  for (size_t e = 0; e < v.size(); ++e) {
    int64_t off = 0;
    for (int64_t d = 0; d < nd; ++d) off += (d == dim ? v[e] : pos[size_t(d)]) * ostride[size_t(d)];
    key[e] = off;
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++pos[size_t(d)] < idx.size(d)) break;
      pos[size_t(d)] = 0;
    }
  }
  Tensor s = src.contiguous();
  return segment_sum(shape, s, csr_by_key(key, total), 1, total, 1, int64_t(v.size()));
}

}  // namespace relpos::k::cuda
