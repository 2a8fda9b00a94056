// kernels/cuda/matmul.cpp — CUDA entry point of matmul: the layout logic of
// kernels/cpu/matmul.cpp (transposed views go to cuBLAS with a transpose flag, not copied;
// anything else is packed once), batch dims broadcast. When every operand's batch offsets are
// i * stride for one stride (always for one batch dim or a contiguous batch; 0 for a
// broadcast operand) the whole product is one strided-batched GEMM, else one strided-batched
// GEMM over the last batch dim per index of the leading ones (attention on split heads).
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

namespace {

// Describe the last two dims of t (rows x cols) as cuBLAS can read them (kernels/plans.h's
// operand_layout, the CPU's rule), or return false.
bool blas_layout(const Tensor& t, dev::GemmOperand& m) {
  OperandLayout l;
  if (!operand_layout(t, l)) return false;
  m.trans = l.trans;
  m.ld = l.ld;
  return true;
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

namespace {

// The operands as cuBLAS reads them. 16-bit operands (k::GemmInputs: every value is a bf16 /
// fp16): contiguous float32 copies, converted to 16-bit buffers of the same layout, go to cuBLAS's
// 16-bit GEMM (tensor cores, float32 accumulation); raw() maps an operand's float32 pointer to its
// 16-bit copy.
struct Operands {
  Tensor a, b;
  Tensor a16, b16;  // float32 tensors used as 16-bit storage: ceil(n / 2) floats hold n halves
  dev::GemmOperand la{}, lb{};
  int half = 0;  // 0: the dtype's own GEMM, 1: bf16, 2: fp16
  const void* raw(const Tensor& x) const {
    if (!half) return x.raw_data();
    return x.raw_data() == a.raw_data() ? a16.raw_data() : b16.raw_data();
  }
  size_t element_size() const { return half ? 2 : dtype_size(a.dtype()); }
};

Operands stage_operands(const Tensor& a_in, const Tensor& b_in, GemmInputs inputs) {
  Operands o;
  const bool f32 = a_in.dtype() == DType::F32;
  o.half = !f32 ? 0 : inputs == GemmInputs::BF16 ? 1 : inputs == GemmInputs::FP16 ? 2 : 0;
  o.a = o.half ? a_in.contiguous() : a_in, o.b = o.half ? b_in.contiguous() : b_in;
  if (!blas_layout(o.a, o.la)) o.a = o.a.contiguous(), blas_layout(o.a, o.la);
  if (!blas_layout(o.b, o.lb)) o.b = o.b.contiguous(), blas_layout(o.b, o.lb);
  if (o.half) {
    o.a16 = empty_cuda({(o.a.numel() + 1) / 2}, DType::F32), o.b16 = empty_cuda({(o.b.numel() + 1) / 2}, DType::F32);
    dev::to_half(o.half, o.a16.raw_data(), static_cast<const float*>(o.a.raw_data()), o.a.numel());
    dev::to_half(o.half, o.b16.raw_data(), static_cast<const float*>(o.b.raw_data()), o.b.numel());
  }
  return o;
}

// a_in [..., M, K] @ b_in [..., K, N] -> plan.out_shape (plan: check::matmul), unrounded.
Tensor matmul_unrounded(const MatmulPlan& plan, const Tensor& a_in, const Tensor& b_in, GemmInputs inputs) {
  const int64_t M = plan.M, K = plan.K, N = plan.N;
  const Shape& batch = plan.batch;
  if (K == 0) return zeros_cuda(plan.out_shape, a_in.dtype());  // empty sum
  Tensor out = empty_cuda(plan.out_shape, a_in.dtype());
  if (out.numel() == 0) return out;
  Operands o = stage_operands(a_in, b_in, inputs);
  const Tensor &a = o.a, &b = o.b;
  dev::GemmOperand &la = o.la, &lb = o.lb;
  const int half = o.half;
  const dev::DT t = dt(a.dtype());
  auto at = [&](const Tensor& x, int64_t off) {
    return static_cast<const char*>(o.raw(x)) + off * int64_t(o.element_size());
  };
  auto raw = [&](const Tensor& x) { return o.raw(x); };

  // Fold a's batch into rows: b unbatched, a row-major with rows evenly spaced.
  if (b_in.dim() == 2 && a_in.dim() > 2 && !la.trans) {
    Tensor af = a.reshape({-1, K});
    if (af.shares_storage(a) || a.is_contiguous()) {
      dev::GemmOperand lf{};
      if (blas_layout(af, lf) && !lf.trans) {
        lf.data = raw(af);
        lb.data = raw(b);
        lf.batch_stride = lb.batch_stride = 0;
        dev::gemm(t, allow_tf32(), af.size(0), N, K, lf, lb, out.raw_data(), N, 0, 1, half);
        return out;
      }
    }
  }
  Shape ae_shape = batch, be_shape = batch;
  ae_shape.insert(ae_shape.end(), {M, K});
  be_shape.insert(be_shape.end(), {K, N});
  Tensor ae = a.expand(ae_shape), be = b.expand(be_shape);
  const int64_t nb = plan.batches;
  const int64_t sa = uniform_batch_stride(ae, batch, nb), sb = uniform_batch_stride(be, batch, nb);
  if (sa >= 0 && sb >= 0) {
    la.data = raw(ae), la.batch_stride = sa;
    lb.data = raw(be), lb.batch_stride = sb;
    dev::gemm(t, allow_tf32(), M, N, K, la, lb, out.raw_data(), N, M * N, nb, half);
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
    dev::gemm(t, allow_tf32(), M, N, K, la, lb, po + i * inner * M * N * int64_t(dtype_size(out.dtype())), N, M * N,
              inner, half);
  }
  return out;
}

}  // namespace

// round_output and bias: the 16-bit rounding, then the bias add, as elementwise kernels on the
// result (on the GPU the passes are cheap next to the GEMM; the CPU fuses them into the GEMM's
// blocks, kernels/cpu/gemm.cpp).
Tensor matmul(const MatmulPlan& plan, const Tensor& a, const Tensor& b, GemmInputs inputs, bool round_output,
              const Tensor& bias) {
  Tensor out = matmul_unrounded(plan, a, b, inputs);
  if (round_output && inputs != GemmInputs::F32 && out.dtype() == DType::F32)
    out = cuda::unary(inputs == GemmInputs::BF16 ? Unary::RoundBF16 : Unary::RoundFP16, out, 0.0, 0.0);
  if (bias.defined() && out.numel() > 0) out = cuda::binary(Binary::Add, out, bias);
  return out;
}

// The activation and its derivative as elementwise kernels on matmul's result (the CPU applies
// them to each block of rows while it is in cache).
MatmulActOut matmul_act(const MatmulPlan& plan, const Tensor& a, const Tensor& b, GemmInputs inputs, bool round_output,
                        const Tensor& bias, Unary act, bool want_grad) {
  const Tensor pre = cuda::matmul(plan, a, b, inputs, round_output, bias);
  if (pre.numel() == 0) return {pre, want_grad ? Tensor::empty(pre.shape(), pre.dtype(), pre.device()) : Tensor()};
  return {cuda::unary(act, pre, 0.0, 0.0), want_grad ? cuda::unary(derivative_of(act), pre, 0.0, 0.0) : Tensor()};
}

// The multiplier as an elementwise kernel on matmul's result (the CPU applies it to each block of
// rows while it is in cache).
Tensor matmul_mul(const MatmulPlan& plan, const Tensor& a, const Tensor& b, GemmInputs inputs, bool round_output,
                  const Tensor& m) {
  return cuda::binary(Binary::Mul, cuda::matmul(plan, a, b, inputs, round_output, Tensor()), m);
}

// The addend as an elementwise kernel on matmul's result (the CPU adds it to each block of rows
// while it is in cache).
Tensor matmul_add(const MatmulPlan& plan, const Tensor& a, const Tensor& b, GemmInputs inputs, bool round_output,
                  const Tensor& bias, const Tensor& r) {
  return cuda::binary(Binary::Add, cuda::matmul(plan, a, b, inputs, round_output, bias), r);
}

// The sums as the reduction kernel over a's last dim (the CPU sums each K chunk of a while it is in
// cache).
MatmulSumsOut matmul_sums(const MatmulPlan& plan, const Tensor& a, const Tensor& b, GemmInputs inputs,
                          bool round_output) {
  return {cuda::matmul(plan, a, b, inputs, round_output, Tensor()),
          cuda::reduce(plan_reduce(a, {1}, false), Reduce::Sum, a, 0)};
}

}  // namespace relpos::k::cuda
