// nn/linear.h — y = x W^T + b with W: [out, in], b: [out] (PyTorch layout).
// x: [..., in] -> [..., out]. W^T is a transposed view handed to BLAS, never copied.
#pragma once
#include "core/rng.h"
#include "kernels/ops.h"
#include "nn/module.h"

namespace relpos::nn {

class Linear : public Module {
 public:
  // W ~ U(-1/sqrt(in), 1/sqrt(in)) like PyTorch's default, b likewise.
  Linear(int64_t in, int64_t out, bool bias, Generator& gen, DType dtype = DType::F32);
  Variable forward(const Variable& x) const;
  // act(forward(x)) as one node, act in the GEMM's epilogue (autograd linear with an activation).
  Variable forward(const Variable& x, k::Unary act) const;
  // residual + forward(x) as one node, the add in the GEMM's epilogue (autograd linear with a
  // residual); an undefined residual: forward(x).
  Variable forward(const Variable& x, const Variable& residual) const;
  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }

 private:
  Variable weight_, bias_;
};

}  // namespace relpos::nn
