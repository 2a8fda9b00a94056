// nn/positional/kerple_log.cpp — KERPLE with the logarithmic kernel (Chi et al. 2022,
// "KERPLE: Kernelized Relative Positional Embedding for Length Extrapolation"; official code
// chijames/KERPLE megatron/mpu/layers.py ParallelKerpleLog).
//   bias[h, qi, kj] = -r1_h * log(1 + r2_h * |kj - qi|)          r1_h, r2_h > 0, per head
// Toeplitz form, added after the 1/sqrt(d) scaling (the reference adds it to the scaled
// logits). Sign: the kernel only sees |kj - qi|, so the sign convention does not matter; the
// reference is causal (tril), and relpos uses the same |kj - qi| for bidirectional attention
// (a symmetric bias, like ALiBi's encoder form).
// Positivity: the reference clamps the raw parameters to >= 0.01 after every step; relpos
// reparametrises instead, r = softplus(u) (positive_param.h), so the optimizer never leaves
// the domain and the map is smooth. The stored parameters are u ("r1_raw", "r2_raw": [H, 1]).
// Init as the official code: r1 ~ U(0, 2), r2 ~ U(0, 1) per head (clamped to >= 0.01 like its
// first forward), or the fixed values r1_init / r2_init for every head.
// One instance per stack shared by its layers (the reference builds one ParallelKerpleLog in
// GPT2ModelPipe and hands it to every layer); model.position_shared=false makes it per layer.
// Parameters: r1_init, r2_init (default: the random reference init).
#include <algorithm>
#include <cmath>

#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/positive_param.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

namespace {
class KerpleLog : public PositionEncoding {
 public:
  KerpleLog(const std::vector<double>& r1, const std::vector<double>& r2, DType dt) {
    const int64_t H = int64_t(r1.size());
    std::vector<double> u1(r1.size()), u2(r2.size());
    std::transform(r1.begin(), r1.end(), u1.begin(), softplus_inverse);
    std::transform(r2.begin(), r2.end(), u2.begin(), softplus_inverse);
    r1_ = register_parameter("r1_raw", Tensor::from_vector(u1, {H, 1}).to(dt), group::kPosition);
    r2_ = register_parameter("r2_raw", Tensor::from_vector(u2, {H, 1}).to(dt), group::kPosition);
  }
  std::string type() const override { return "kerple_log"; }

  Variable toeplitz_bias(const AttnGeometry& g) const override {  // [H, Lq + Lk - 1]
    Variable dist(geometry_cached("kerple_log.dist", g, [&] {  // |kj - qi|: [1, Lq+Lk-1]
      std::vector<double> d = toeplitz_distances(g).to_vector<double>();
      for (auto& x : d) x = std::abs(x);
      return Tensor::from_vector(d, {1, int64_t(d.size())}).to(r1_.dtype());
    }));
    return neg(softplus(r1_) * log(add(softplus(r2_) * dist, 1.0)));
  }

 private:
  Variable r1_, r2_;
};
}  // namespace

namespace {
PositionEncodingPtr make_kerple_log(const PositionConfig& cfg, Generator& gen) {
  auto init = [&](const std::string& key, double hi) {
    std::vector<double> r;
    if (cfg.params.has(key)) {
      double v = cfg.params.get_double(key, 1.0);
      RELPOS_CHECK_CONFIG(v > 0, "position 'kerple_log': {} must be > 0, got {}", key, v);
      r.assign(size_t(cfg.n_heads), v);
    } else {
      r = Tensor::rand({cfg.n_heads}, gen, DType::F64, 0.0, hi).to_vector<double>();
      for (auto& x : r) x = std::max(x, 0.01);
    }
    return r;
  };
  std::vector<double> r1 = init("r1_init", 2.0);
  std::vector<double> r2 = init("r2_init", 1.0);
  return std::make_shared<KerpleLog>(r1, r2, cfg.dtype);
}
}  // namespace

PositionVariant kerple_log_encoding() {
  return {.name = "kerple_log",
          .description = "KERPLE log kernel -r1 log(1 + r2 |i-j|), learnable r1, r2 > 0 per head (Chi 2022)",
          .params = {param::real("r1_init", Computed{"U(0, 2) per head"},
                                 "initial r1 > 0 of -r1 log(1 + r2 |i - j|), all heads"),
                     param::real("r2_init", Computed{"U(0, 1) per head"}, "initial r2 > 0, all heads")},
          .make = make_kerple_log,
          .fused_attention = true,
          .facts = {.distance_indexed = true}};
}

}  // namespace relpos::nn
