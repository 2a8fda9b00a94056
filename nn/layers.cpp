#include "nn/layers.h"

#include "autograd/ops.h"
#include "nn/init.h"

namespace relpos::nn {

Embedding::Embedding(int64_t num, int64_t dim, double std, Generator& gen, DType dtype) {
  RELPOS_CHECK(num > 0 && dim > 0, "Embedding: sizes must be positive, got {} x {}", num, dim);
  weight_ = register_parameter("weight", init::normal({num, dim}, std, gen, dtype));
}

Variable Embedding::forward(const Tensor& idx) const { return embedding(weight_, idx); }

LayerNorm::LayerNorm(int64_t dim, double eps, DType dtype) : eps_(eps) {
  weight_ = register_parameter("weight", init::ones({dim}, dtype), group::kNormsAndBiases);
  bias_ = register_parameter("bias", init::zeros({dim}, dtype), group::kNormsAndBiases);
}

Variable LayerNorm::forward(const Variable& x) const { return layer_norm(x, weight_, bias_, eps_); }

RMSNorm::RMSNorm(int64_t dim, double eps, DType dtype) : eps_(eps) {
  weight_ = register_parameter("weight", init::ones({dim}, dtype), group::kNormsAndBiases);
}

Variable RMSNorm::forward(const Variable& x) const { return rms_norm(x, weight_, eps_); }

Norm::Norm(NormType kind, int64_t dim, DType dtype) {
  if (kind == NormType::LayerNorm)
    ln_ = register_module("ln", std::make_shared<LayerNorm>(dim, 1e-5, dtype));
  else
    rms_ = register_module("rms", std::make_shared<RMSNorm>(dim, 1e-6, dtype));
}

Variable Norm::forward(const Variable& x) const { return ln_ ? ln_->forward(x) : rms_->forward(x); }

Dropout::Dropout(double p) : p_(p) {
  RELPOS_CHECK(p >= 0.0 && p < 1.0, "Dropout: p must be in [0, 1), got {}", p);
}

Variable apply_dropout(const Variable& x, double p, bool training, Generator* gen) {
  if (!dropout_applies(p, training, gen)) return x;
  return dropout(x, p, true, *gen);
}

MLP::MLP(int64_t d_model, int64_t d_ff, double dropout, Generator& gen, DType dtype) : dropout_(dropout) {
  fc1_ = register_module("fc1", std::make_shared<Linear>(d_model, d_ff, true, gen, dtype));
  fc2_ = register_module("fc2", std::make_shared<Linear>(d_ff, d_model, true, gen, dtype));
}

Variable MLP::forward(const Variable& x, Generator* gen, const Variable& residual) const {
  // No dropout between the layers: one node (autograd mlp), whose backward multiplies by gelu' in
  // a GEMM's epilogue.
  if (!dropout_applies(dropout_, is_training(), gen))
    return mlp(x, fc1_->weight(), fc1_->bias(), fc2_->weight(), fc2_->bias(), k::Unary::GeluErf, residual);
  Variable h = fc1_->forward(x, k::Unary::GeluErf);  // gelu in fc1's GEMM epilogue
  return fc2_->forward(apply_dropout(h, dropout_, is_training(), gen), residual);
}

}  // namespace relpos::nn
