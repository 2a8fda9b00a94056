// kernels/cpu/matmul.cpp — (batched) matmul and matmul_act through the CPU GEMM provider
// (kernels/cpu/gemm.h). a: [..., M, K], b: [..., K, N] (+ bias [N]) -> out [..., M, N], batch
// dims broadcast; the bias and the activation are the GEMM's epilogue (kernels/cpu/gemm.h), and
// so are matmul_sums' sums of a (2-D).
// A matrix operand whose last two dims are row-major (stride[-1] == 1) goes in as NoTrans;
// column-major (stride[-2] == 1, e.g. a transposed view) goes in as Trans; anything else
// is copied once. When b has no batch dims and a's batch dims fold into rows, the whole
// product is one GEMM of (batch*M) x K by K x N.
#include "kernels/backend.h"
#include "kernels/cpu/gemm.h"

namespace relpos::k::cpu {

namespace {

using MatLayout = OperandLayout;
constexpr auto blas_layout = operand_layout;  // kernels/plans.h

// Epilogue of a (batched) product: the bias, and the activation with its derivative (act_grad:
// the output's shape, contiguous, made here when want_grad).
struct Epilogue {
  Tensor bias;
  bool has_act = false;
  Unary act = Unary::Relu;
  bool want_grad = false;
  Tensor act_grad;
  Tensor mul;  // the output's shape, contiguous: C *= mul after everything else
  Tensor add;  // the output's shape, contiguous: C += add after everything else (matmul_add)
  bool want_sums = false;  // (2-D products only) a's sums along K, made by the GEMM into a_sums
  Tensor a_sums;
};

template <typename T>
void gemm(GemmInputs inputs, bool round_output, MatLayout la, MatLayout lb, int64_t M, int64_t N, int64_t K, const T* a,
          const T* b, T* c, int64_t ldc, const Epilogue& ep, int64_t c_offset) {
  GemmEpilogue<T> e{ep.bias.defined() ? ep.bias.data<T>() : nullptr,
                    ep.has_act,
                    ep.act,
                    ep.act_grad.defined() ? ep.act_grad.data<T>() + c_offset : nullptr,
                    ldc,
                    ep.mul.defined() ? ep.mul.data<T>() + c_offset : nullptr,
                    ep.a_sums.defined() ? ep.a_sums.data<T>() : nullptr,
                    ep.add.defined() ? ep.add.data<T>() + c_offset : nullptr};
  if constexpr (std::is_same_v<T, float>)
    gemm_f32(inputs, round_output, la.trans, lb.trans, M, N, K, a, la.ld, b, lb.ld, c, ldc, e);
  else
    gemm_f64(la.trans, lb.trans, M, N, K, a, la.ld, b, lb.ld, c, ldc, e);
}

// The product, act' (when the epilogue saves it) and a's sums (when asked for).
struct MatmulOut {
  Tensor y, act_grad, a_sums;
};

// a_in [..., M, K] @ b_in [..., K, N] -> plan.out_shape (plan: check::matmul).
MatmulOut matmul_with(const MatmulPlan& plan, const Tensor& a_in, const Tensor& b_in, GemmInputs inputs,
                      bool round_output, Epilogue ep) {
  const int64_t M = plan.M, K = plan.K, N = plan.N;
  const Shape& batch = plan.batch;
  const Shape& out_shape = plan.out_shape;
  if (ep.has_act && ep.want_grad) ep.act_grad = Tensor::empty(out_shape, a_in.dtype());
  if (ep.want_sums) {  // 2-D (matmul_sums' check); without a product to make them, made here
    if (K == 0 || N == 0)
      ep.a_sums = cpu::reduce(plan_reduce(a_in, {1}, false), Reduce::Sum, a_in, 0);
    else
      ep.a_sums = Tensor::empty({M}, a_in.dtype());
  }
  if (K == 0) {  // empty sum: zeros, plus the bias, then the activation, the multiplier or the addend
    Tensor z = Tensor::zeros(out_shape, a_in.dtype());
    if (ep.bias.defined() && z.numel() > 0) z = cpu::binary(Binary::Add, z, ep.bias);
    if (ep.add.defined() && z.numel() > 0) return {cpu::binary(Binary::Add, z, ep.add), ep.act_grad, ep.a_sums};
    if (ep.mul.defined() && z.numel() > 0) return {cpu::binary(Binary::Mul, z, ep.mul), ep.act_grad, ep.a_sums};
    if (!ep.has_act || z.numel() == 0) return {z, ep.act_grad, ep.a_sums};
    if (ep.want_grad) ep.act_grad = cpu::unary(derivative_of(ep.act), z, 0.0, 0.0);
    return {cpu::unary(ep.act, z, 0.0, 0.0), ep.act_grad, ep.a_sums};
  }
  Tensor out = Tensor::empty(out_shape, a_in.dtype());
  if (out.numel() == 0) return {out, ep.act_grad, ep.a_sums};
  if (ep.bias.defined()) ep.bias = ep.bias.contiguous();
  if (ep.mul.defined()) ep.mul = ep.mul.contiguous();
  if (ep.add.defined()) ep.add = ep.add.contiguous();

  Tensor a = a_in, b = b_in;
  MatLayout la{}, lb{};
  if (!blas_layout(a, la)) a = a.contiguous(), blas_layout(a, la);
  if (!blas_layout(b, lb)) b = b.contiguous(), blas_layout(b, lb);

  visit_float(a.dtype(), "matmul", [&]<typename T>() {
    // Fold a's batch into rows: b unbatched, a row-major with rows evenly spaced.
    if (b_in.dim() == 2 && a_in.dim() > 2 && !la.trans) {
      Tensor af = a.reshape({-1, K});  // a view when a's batch and row dims are evenly strided
      if (af.shares_storage(a) || a.is_contiguous()) {
        MatLayout lf{};
        if (blas_layout(af, lf) && !lf.trans) {
          gemm<T>(inputs, round_output, lf, lb, af.size(0), N, K, af.data<T>(), b.data<T>(), out.data<T>(), N, ep, 0);
          return;
        }
      }
    }
    Shape ae_shape = batch, be_shape = batch;
    ae_shape.insert(ae_shape.end(), {M, K});
    be_shape.insert(be_shape.end(), {K, N});
    Tensor ae = a.expand(ae_shape), be = b.expand(be_shape);
    const int64_t nb = plan.batches;
    const int64_t nbd = int64_t(batch.size());
    T* po = out.data<T>();
    for (int64_t i = 0; i < nb; ++i) {
      int64_t rem = i, oa = 0, ob = 0;
      for (int64_t d = nbd - 1; d >= 0; --d) {
        int64_t idx = rem % batch[d];
        rem /= batch[d];
        oa += idx * ae.strides()[d];
        ob += idx * be.strides()[d];
      }
      gemm<T>(inputs, round_output, la, lb, M, N, K, ae.data<T>() + oa, be.data<T>() + ob, po + i * M * N, N, ep,
              i * M * N);
    }
  });
  return {out, ep.act_grad, ep.a_sums};
}

}  // namespace

Tensor matmul(const MatmulPlan& plan, const Tensor& a, const Tensor& b, GemmInputs inputs, bool round_output,
              const Tensor& bias) {
  return matmul_with(plan, a, b, inputs, round_output, {bias}).y;
}

MatmulActOut matmul_act(const MatmulPlan& plan, const Tensor& a, const Tensor& b, GemmInputs inputs, bool round_output,
                        const Tensor& bias, Unary act, bool want_grad) {
  MatmulOut r = matmul_with(plan, a, b, inputs, round_output, {bias, true, act, want_grad, Tensor()});
  return {r.y, r.act_grad};
}

Tensor matmul_mul(const MatmulPlan& plan, const Tensor& a, const Tensor& b, GemmInputs inputs, bool round_output,
                  const Tensor& m) {
  return matmul_with(plan, a, b, inputs, round_output, {Tensor(), false, Unary::Relu, false, Tensor(), m}).y;
}

Tensor matmul_add(const MatmulPlan& plan, const Tensor& a, const Tensor& b, GemmInputs inputs, bool round_output,
                  const Tensor& bias, const Tensor& r) {
  Epilogue ep;
  ep.bias = bias, ep.add = r;
  return matmul_with(plan, a, b, inputs, round_output, ep).y;
}

MatmulSumsOut matmul_sums(const MatmulPlan& plan, const Tensor& a, const Tensor& b, GemmInputs inputs,
                          bool round_output) {
  Epilogue ep;
  ep.want_sums = true;
  MatmulOut r = matmul_with(plan, a, b, inputs, round_output, ep);
  return {r.y, r.a_sums};
}

}  // namespace relpos::k::cpu
