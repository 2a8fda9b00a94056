// kernels/cuda/matmul.cpp — CUDA entry point of matmul: the layout logic of
// kernels/cpu/matmul.cpp (transposed views go to cuBLAS with a transpose flag, not copied;
// anything else is packed once), batch dims broadcast. When every operand's batch offsets are
// i * stride for one stride (always for one batch dim or a contiguous batch; 0 for a
// broadcast operand) the whole product is one strided-batched GEMM, else one strided-batched
// GEMM over the last batch dim per index of the leading ones (attention on split heads).
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

namespace {

// Describe the last two dims of t (rows x cols) as cuBLAS can read them, or return false.
bool blas_layout(const Tensor& t, dev::GemmOperand& m) {
  int64_t rows = t.size(-2), cols = t.size(-1);
  int64_t rs = t.strides()[size_t(t.dim() - 2)], cs = t.strides()[size_t(t.dim() - 1)];
  if ((cs == 1 || cols == 1) && rs >= std::max<int64_t>(cols, 1)) {
    m.trans = false;
    m.ld = rows == 1 ? std::max<int64_t>(cols, 1) : rs;
    return true;
  }
  if ((rs == 1 || rows == 1) && cs >= std::max<int64_t>(rows, 1)) {
    m.trans = true;
    m.ld = cols == 1 ? std::max<int64_t>(rows, 1) : cs;
    return true;
  }
  return false;
}

// Element offset of batch i of t (t expanded to batch + 2 dims).
int64_t batch_offset(const Tensor& t, const Shape& batch, int64_t i) {
  int64_t off = 0;
  for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
    off += (i % batch[size_t(d)]) * t.strides()[size_t(d)];
    i /= batch[size_t(d)];
  }
  return off;
}

// The single batch stride of t if offset(i) == i * stride for every i, else -1.
int64_t uniform_batch_stride(const Tensor& t, const Shape& batch, int64_t nb) {
  if (nb <= 1) return 0;
  const int64_t s = batch_offset(t, batch, 1);
  for (int64_t i = 2; i < nb; ++i)
    if (batch_offset(t, batch, i) != i * s) return -1;
  return s;
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in, GemmInputs) {
  const int64_t M = a_in.size(-2), K = a_in.size(-1), N = b_in.size(-1);
  Shape ab(a_in.shape().begin(), a_in.shape().end() - 2);
  Shape bb(b_in.shape().begin(), b_in.shape().end() - 2);
  Shape batch = broadcast_shapes(ab, bb, "matmul (batch dims)");
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  if (K == 0) return zeros_cuda(out_shape, a_in.dtype());  // empty sum
  Tensor out = empty_cuda(out_shape, a_in.dtype());
  if (out.numel() == 0) return out;

  Tensor a = a_in, b = b_in;
  dev::GemmOperand la{}, lb{};
  if (!blas_layout(a, la)) a = a.contiguous(), blas_layout(a, la);
  if (!blas_layout(b, lb)) b = b.contiguous(), blas_layout(b, lb);
  const dev::DT t = dt(a.dtype());
  const size_t es = dtype_size(a.dtype());
  auto at = [&](const Tensor& x, int64_t off) { return static_cast<const char*>(x.raw_data()) + off * int64_t(es); };

  // Fold a's batch into rows: b unbatched, a row-major with rows evenly spaced.
  if (bb.empty() && !ab.empty() && !la.trans) {
    Tensor af = a.reshape({-1, K});
    if (af.shares_storage(a) || a.is_contiguous()) {
      dev::GemmOperand lf{};
      if (blas_layout(af, lf) && !lf.trans) {
        lf.data = af.raw_data();
        lb.data = b.raw_data();
        lf.batch_stride = lb.batch_stride = 0;
        dev::gemm(t, allow_tf32(), af.size(0), N, K, lf, lb, out.raw_data(), N, 0, 1);
        return out;
      }
    }
  }
  Shape ae_shape = batch, be_shape = batch;
  ae_shape.insert(ae_shape.end(), {M, K});
  be_shape.insert(be_shape.end(), {K, N});
  Tensor ae = a.expand(ae_shape), be = b.expand(be_shape);
  const int64_t nb = numel_of(batch);
  const int64_t sa = uniform_batch_stride(ae, batch, nb), sb = uniform_batch_stride(be, batch, nb);
  if (sa >= 0 && sb >= 0) {
    la.data = ae.raw_data(), la.batch_stride = sa;
    lb.data = be.raw_data(), lb.batch_stride = sb;
    dev::gemm(t, allow_tf32(), M, N, K, la, lb, out.raw_data(), N, M * N, nb);
    return out;
  }
  // Batch offsets that are not one stride apart (split heads: [B, H] over a [B, L, H, dh]
  // buffer): the last batch dim always is, so one strided-batched GEMM over it per index of
  // the leading batch dims (B calls for attention, not B * H).
  const size_t last = batch.size() - 1;
  const Shape lead(batch.begin(), batch.end() - 1);
  const int64_t inner = batch[last], outer = nb / inner;
  la.batch_stride = ae.strides()[last], lb.batch_stride = be.strides()[last];
  char* po = static_cast<char*>(out.raw_data());
  for (int64_t i = 0; i < outer; ++i) {
    la.data = at(ae, batch_offset(ae, lead, i));
    lb.data = at(be, batch_offset(be, lead, i));
    dev::gemm(t, allow_tf32(), M, N, K, la, lb, po + i * inner * M * N * int64_t(es), N, M * N, inner);
  }
  return out;
}

}  // namespace relpos::k::cuda
