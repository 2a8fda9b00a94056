// kernels/cuda/elementwise.cpp — CUDA entry points of the elementwise ops (arguments checked
// in kernels/checks.cpp): a fresh contiguous output, then one strided launch
// (kernels/cuda/elementwise.cu). causal_fill is here too (masking.cu).
#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

// The device side switches on the integer values of k::Unary / k::Binary.
static_assert(int(Unary::Neg) == 0 && int(Unary::Ceil) == 14 && int(Unary::ReluGrad) == 15 &&
              int(Unary::SigmoidGradFromY) == 20 && int(Unary::AddScalar) == 21 && int(Unary::ClampMask) == 26 &&
              int(Unary::RoundBF16) == 27 && int(Unary::RoundFP16) == 28);
static_assert(int(Binary::Add) == 0 && int(Binary::Div) == 3 && int(Binary::Pow) == 4 && int(Binary::Ge) == 12);

Tensor unary(Unary op, const Tensor& x, double p, double q) {
  Tensor out = empty_cuda(x.shape(), x.dtype());
  dev::unary(int(op), dt(x.dtype()), out.raw_data(), x.raw_data(), strides_of(x), geom(x.shape(), "unary op"), p, q);
  return out;
}

Tensor unary_grad(Unary deriv, const Tensor& g, const Tensor& x, double p, double q) {
  Tensor out = empty_cuda(x.shape(), x.dtype());
  dev::unary_grad(int(deriv), dt(x.dtype()), out.raw_data(), g.raw_data(), strides_of(g), x.raw_data(), strides_of(x),
                  geom(x.shape(), "unary_grad"), p, q);
  return out;
}

Tensor binary(Binary op, const Tensor& a, const Tensor& b) {
  const char* name = op == Binary::Add ? "add" : op == Binary::Sub ? "sub" : op == Binary::Mul ? "mul"
                     : op == Binary::Div ? "div" : "binary op";
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = empty_cuda(shape, a.dtype());
  Tensor ae = a.expand(shape), be = b.expand(shape);
  const bool int_div = op == Binary::Div && a.dtype() == DType::I64;
  // int64 division by zero: checked on the device, thrown at the next host read
  const dev::Check chk = int_div ? device_check([da = describe(a), db = describe(b)](uint64_t) {
    return fmt::format("div: integer division by zero or overflow in {} / {}", da, db);
  })
                                 : dev::Check{};
  dev::binary(int(op), dt(a.dtype()), out.raw_data(), ae.raw_data(), strides_of(ae), be.raw_data(), strides_of(be),
              geom(shape, name), chk);
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor c = cond.expand(shape), ae = a.expand(shape), be = b.expand(shape);
  Tensor out = empty_cuda(shape, a.dtype());
  dev::where(dt(cond.dtype()), dt(a.dtype()), out.raw_data(), c.raw_data(), strides_of(c), ae.raw_data(),
             strides_of(ae), be.raw_data(), strides_of(be), geom(shape, "where"));
  return out;
}

void add_(const Tensor& dst, const Tensor& src, double alpha) {
  Tensor s = src.expand(dst.shape());
  dev::add_inplace(dt(dst.dtype()), dst.raw_data(), strides_of(dst), s.raw_data(), strides_of(s),
                   geom(dst.shape(), "add_"), alpha);
  dst.bump_version();
}

void mul_(const Tensor& dst, double s) {
  dev::mul_inplace(dt(dst.dtype()), dst.raw_data(), strides_of(dst), geom(dst.shape(), "mul_"), s);
  dst.bump_version();
}

// x: [..., Lq, Lk] -> fresh contiguous copy with the hidden cells set to value.
Tensor causal_fill(const Tensor& x_in, int64_t q_offset, int64_t k_offset, double value) {
  const Tensor x = x_in.contiguous();
  const int64_t Lq = x.size(-2), Lk = x.size(-1);
  const int64_t rows = x.numel() / std::max<int64_t>(Lk, 1);
  Tensor out = empty_cuda(x.shape(), x.dtype());
  if (x.numel() > 0)
    dev::causal_fill(dt(x.dtype()), out.raw_data(), x.raw_data(), rows, Lq, Lk, q_offset, k_offset, value);
  return out;
}

}  // namespace relpos::k::cuda
