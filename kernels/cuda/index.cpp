// kernels/cuda/index.cpp — CUDA entry points of embedding, index_select, gather and the
// scatter-adds (embedding_backward, index_add, scatter_add). Indices never travel to the
// host: the kernels check them on the device and record the first bad one (core/cuda_runtime.h,
// begin_device_check); the next host read throws the message of kernels/cpu/index.cpp,
// built then from the index tensor kept here. The scatter-adds sort their contributions on
// the device (index.cu: keys, a stable CUB radix sort, segment bounds, ordered segment sums),
// so they stay deterministic and bit-identical to the CPU.
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

namespace {

void check_float(const Tensor& t, const char* op) {
  RELPOS_CHECK(is_floating(t.dtype()), "{}: expected a floating dtype (float32 or float64), got {}", op,
               dtype_name(t.dtype()));
}

// The device check of one launch over idx: the CPU's "<op>: index V out of range [0, bound)".
dev::Check index_check(const Tensor& idx, int64_t bound, const char* op) {
  return device_check([idx, bound, op](uint64_t pos) {
    return fmt::format("{}: index {} out of range [0, {})", op, element(idx, pos), bound);
  });
}
// ... and "... along dim D" (gather, scatter_add).
dev::Check gather_check(const Tensor& idx, int64_t bound, int64_t dim, const char* op) {
  return device_check([idx, bound, dim, op](uint64_t pos) {
    return fmt::format("{}: index {} out of range [0, {}) along dim {}", op, element(idx, pos), bound, dim);
  });
}

// Segments of the contributions: seg_begin [nseg + 1] and perm [n] (positions of segment s,
// increasing, at seg_begin[s] .. seg_begin[s+1]), from the keys of `fill_keys` (index.cu).
struct Segments {
  Tensor seg_begin, perm;
};
template <typename FillKeys>
Segments device_segments(int64_t n, int64_t nseg, FillKeys&& fill_keys) {
  RELPOS_CHECK(n < (int64_t(1) << 31), "scatter-add: {} contributions (the device sort takes < 2^31)", n);
  Segments s;
  if (n == 0) {
    s.seg_begin = zeros_cuda({nseg + 1}, DType::I64);
    s.perm = zeros_cuda({1}, DType::I64);
    return s;
  }
  // unsigned 64-bit keys live in int64 tensors (same size)
  Tensor key = empty_cuda({n}, DType::I64), val = empty_cuda({n}, DType::I64);
  auto* kp = reinterpret_cast<unsigned long long*>(key.raw_data());
  fill_keys(kp, val.data<int64_t>());
  const int end_bit = dev::end_bit_for(nseg);
  const size_t temp_bytes = dev::sort_pairs_temp_bytes(n, end_bit);
  Tensor temp = empty_cuda({int64_t(temp_bytes / 8 + 1)}, DType::I64);
  Tensor sorted = empty_cuda({n}, DType::I64);
  s.perm = empty_cuda({n}, DType::I64);
  auto* sp = reinterpret_cast<unsigned long long*>(sorted.raw_data());
  dev::sort_pairs(temp.raw_data(), temp_bytes, kp, sp, val.data<int64_t>(), s.perm.data<int64_t>(), n, end_bit);
  s.seg_begin = empty_cuda({nseg + 1}, DType::I64);
  dev::segment_bounds(s.seg_begin.data<int64_t>(), sp, n, nseg);
  return s;
}

// out [pre, nseg, post] = segment sums of src [pre, src_m, post] (contiguous, on the device).
Tensor segment_sum(const Shape& out_shape, const Tensor& src, const Segments& c, int64_t pre, int64_t nseg,
                   int64_t post, int64_t src_m) {
  Tensor out = empty_cuda(out_shape, src.dtype());
  if (out.numel() == 0) return out;
  dev::segment_sum(dt(src.dtype()), out.raw_data(), src.raw_data(), c.seg_begin.data<int64_t>(), c.perm.data<int64_t>(),
                   pre, nseg, post, src_m);
  return out;
}

// Segments keyed by a flat index vector ids (any shape, read row-major) in [0, nseg).
Segments segments_by_ids(const Tensor& idx, int64_t nseg, const char* op) {
  const Tensor ic = idx.contiguous();
  const int64_t n = ic.numel();
  if (n == 0) return device_segments(0, nseg, [](unsigned long long*, int64_t*) {});
  const dev::Check chk = index_check(idx, nseg, op);
  return device_segments(n, nseg, [&](unsigned long long* key, int64_t* val) {
    dev::keys_from_ids(ic.data<int64_t>(), n, nseg, key, val, chk);
  });
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
  check_float(weight, "embedding");
  Shape out_shape = idx.shape();
  out_shape.push_back(D);
  Tensor out = empty_cuda(out_shape, weight.dtype());
  if (out.numel() == 0) return out;
  Tensor w = weight.contiguous(), ic = idx.contiguous();
  dev::embedding(dt(weight.dtype()), out.raw_data(), w.raw_data(), ic.data<int64_t>(), ic.numel(), V, D,
                 index_check(idx, V, "embedding"));
  return out;
}

// gy: [..., D], idx: [...] -> [num_rows, D]; row r sums gy rows i with idx[i] == r, i increasing.
Tensor embedding_backward(const Tensor& gy, const Tensor& idx, int64_t num_rows) {
  const int64_t D = gy.size(-1);
  RELPOS_CHECK(idx.numel() * D == gy.numel(), "embedding_backward: grad {} does not match indices {}",
               shape_str(gy.shape()), shape_str(idx.shape()));
  check_float(gy, "embedding_backward");
  Tensor g = gy.contiguous();
  return segment_sum({num_rows, D}, g, segments_by_ids(idx, num_rows, "embedding_backward"), 1, num_rows, D,
                     idx.numel());
}

// x: [pre, n, post] (n at dim), idx: [m] -> [pre, m, post]
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& idx) {
  dim = wrap_existing_dim(dim, x.dim(), "index_select");
  const int64_t m = idx.numel();
  Shape out_shape = x.shape();
  out_shape[size_t(dim)] = m;
  Tensor out = empty_cuda(out_shape, x.dtype());
  if (out.numel() == 0) return out;
  Tensor xc = x.contiguous(), ic = idx.contiguous();
  dev::index_select(dt(x.dtype()), out.raw_data(), xc.raw_data(), ic.data<int64_t>(), prod(x.shape(), 0, size_t(dim)),
                    x.size(dim), m, prod(x.shape(), size_t(dim) + 1, x.shape().size()),
                    index_check(idx, x.size(dim), "index_select"));
  return out;
}

// zeros(shape) with src slice j added at ids[j] along dim, j increasing (as the CPU's add_ loop).
Tensor index_add(const Shape& shape, int64_t dim, const Tensor& idx, const Tensor& src) {
  dim = wrap_existing_dim(dim, int64_t(shape.size()), "index_add");
  const int64_t m = idx.numel();
  check_defined(src, "index_add", "source");
  RELPOS_CHECK(src.size(dim) == m, "index_add: source {} has {} entries along dim {}, index has {}",
               shape_str(src.shape()), src.size(dim), dim, m);
  check_float(src, "index_add");
  Shape src_shape = shape;
  src_shape[size_t(dim)] = m;
  Tensor s = src.expand(src_shape).contiguous();  // the CPU's add_ broadcasts each slice the same way
  const int64_t pre = prod(shape, 0, size_t(dim)), post = prod(shape, size_t(dim) + 1, shape.size());
  return segment_sum(shape, s, segments_by_ids(idx, shape[size_t(dim)], "index_add"), pre, shape[size_t(dim)], post, m);
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx) {
  dim = wrap_existing_dim(dim, x.dim(), "gather");
  Tensor out = empty_cuda(idx.shape(), x.dtype());
  if (idx.numel() == 0) return out;
  dev::gather(dt(x.dtype()), out.raw_data(), x.raw_data(), strides_of(x), idx.data<int64_t>(), strides_of(idx),
              geom(idx.shape(), "gather"), int(dim), x.size(dim), gather_check(idx, x.size(dim), dim, "gather"));
  return out;
}

// zeros(shape) with out[.., idx[e], ..] += src[e], elements e of idx in row-major order.
Tensor scatter_add(const Shape& shape, int64_t dim, const Tensor& idx, const Tensor& src) {
  dim = wrap_existing_dim(dim, int64_t(shape.size()), "scatter_add");
  if (idx.numel() == 0) return zeros_cuda(shape, src.dtype());
  const int64_t nd = idx.dim(), total = numel_of(shape), n = idx.numel();
  // Element strides of the contiguous output over idx's dims.
  dev::Strides os;
  int64_t st = 1;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    if (d < nd) os.s[d] = st;
    st *= shape[size_t(d)];
  }
  const dev::Check chk = gather_check(idx, shape[size_t(dim)], dim, "scatter_add");
  const dev::Geom ig = geom(idx.shape(), "scatter_add");
  const dev::Strides is = strides_of(idx);
  Segments seg = device_segments(n, total, [&](unsigned long long* key, int64_t* val) {
    dev::keys_scatter(idx.data<int64_t>(), is, ig, int(dim), shape[size_t(dim)], os, total, key, val, chk);
  });
  Tensor s = src.contiguous();
  return segment_sum(shape, s, seg, 1, total, 1, n);
}

}  // namespace relpos::k::cuda
