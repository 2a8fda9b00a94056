// nn/layers.h — the small layers: Embedding, LayerNorm, RMSNorm, Dropout, MLP (GELU).
// Shapes: x is [..., D] unless said otherwise.
#pragma once
#include <memory>

#include "core/enum_names.h"
#include "core/rng.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace relpos::nn {

// idx: int64 [...] -> [..., D]; weight [V, D] ~ N(0, std)
class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim, double std, Generator& gen, DType dtype = DType::F32);
  Variable forward(const Tensor& idx) const;
  const Variable& weight() const { return weight_; }

 private:
  Variable weight_;
};

// y = (x - mean) / sqrt(var + eps) * weight + bias over the last dim
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, DType dtype = DType::F32);
  Variable forward(const Variable& x) const;

 private:
  Variable weight_, bias_;
  double eps_;
};

// y = x / sqrt(mean(x^2) + eps) * weight over the last dim
class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-6, DType dtype = DType::F32);
  Variable forward(const Variable& x) const;

 private:
  Variable weight_;
  double eps_;
};

// model.norm_type (and the kind of model.qk_norm).
enum class NormType { LayerNorm, RMSNorm };

// LayerNorm or RMSNorm.
class Norm : public Module {
 public:
  Norm(NormType kind, int64_t dim, DType dtype = DType::F32);
  Variable forward(const Variable& x) const;

 private:
  std::shared_ptr<LayerNorm> ln_;
  std::shared_ptr<RMSNorm> rms_;
};

// Whether dropout with rate p does anything: training, p > 0 and a generator to draw from.
inline bool dropout_applies(double p, bool training, const Generator* gen) {
  return training && p > 0.0 && gen != nullptr;
}
// Inverted dropout; the identity where !dropout_applies (a null generator, eval mode, p = 0).
Variable apply_dropout(const Variable& x, double p, bool training, Generator* gen);

// Dropout as a module: identity in eval mode or without a generator.
class Dropout : public Module {
 public:
  explicit Dropout(double p);
  Variable forward(const Variable& x, Generator* gen) const { return apply_dropout(x, p_, is_training(), gen); }

 private:
  double p_;
};

// fc2(gelu(fc1(x))): [.., D] -> [.., d_ff] -> [.., D]
class MLP : public Module {
 public:
  MLP(int64_t d_model, int64_t d_ff, double dropout, Generator& gen, DType dtype = DType::F32);
  // residual (x's shape; undefined: none) is added to the output: in fc2's GEMM epilogue where
  // there is no dropout between the layers (autograd mlp), else as an add.
  Variable forward(const Variable& x, Generator* gen, const Variable& residual = Variable()) const;

 private:
  std::shared_ptr<Linear> fc1_, fc2_;
  double dropout_;
};

}  // namespace relpos::nn

template <>
struct relpos::EnumTable<relpos::nn::NormType> {
  static constexpr EnumName<nn::NormType> items[] = {{nn::NormType::LayerNorm, "layernorm"},
                                                     {nn::NormType::RMSNorm, "rmsnorm"}};
};
