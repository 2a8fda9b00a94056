// nn/positional/kerple_power.cpp — KERPLE with the power kernel (Chi et al. 2022, "KERPLE:
// Kernelized Relative Positional Embedding for Length Extrapolation"; official code
// chijames/KERPLE megatron/mpu/layers.py ParallelKerplePower, bias part).
//   bias[h, qi, kj] = -r1_h * |kj - qi|^r2_h          r1_h > 0, 0 < r2_h < 2, per head
// (r1 = 1, r2 = 1 is ALiBi with slope 1.) Toeplitz form, added after the 1/sqrt(d) scaling.
// Distance 0 gives exactly 0 (and no gradient into r2 there: d^r2 is evaluated as
// exp(r2 log d) only for d >= 1). The kernel sees |kj - qi| only: the reference is causal
// (tril); bidirectional attention gets the same symmetric bias.
// Constraints: the reference clamps r1 >= 0.01 and 0.01 <= r2 <= 2 after every step; relpos
// reparametrises: r1 = softplus(u1), r2 = 2 sigmoid(u2) (positive_param.h), so r2 stays in the
// open interval (0, 2) — 2 is approached, never reached. Stored: "r1_raw", "r2_raw" ([H, 1]).
// Init as the official code: r1 ~ U(0, 1), r2 ~ U(0, 2) per head, clamped to [0.01, 1.99]
// (1.99 keeps u2 finite), or the fixed values r1_init / r2_init for every head.
// Shared by the layers of a stack by default, as in the reference (one module for all layers).
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
class KerplePower : public PositionEncoding {
 public:
  KerplePower(const std::vector<double>& r1, const std::vector<double>& r2, DType dt) {
    const int64_t H = int64_t(r1.size());
    std::vector<double> u1(r1.size()), u2(r2.size());
    std::transform(r1.begin(), r1.end(), u1.begin(), softplus_inverse);
    std::transform(r2.begin(), r2.end(), u2.begin(), two_sigmoid_inverse);
    r1_ = register_parameter("r1_raw", Tensor::from_vector(u1, {H, 1}).to(dt), group::kPosition);
    r2_ = register_parameter("r2_raw", Tensor::from_vector(u2, {H, 1}).to(dt), group::kPosition);
  }
  std::string type() const override { return "kerple_power"; }

  Variable toeplitz_bias(const AttnGeometry& g) const override {  // [H, Lq + Lk - 1]
    // log|d| and [|d| >= 1] for every Toeplitz entry: [2, Lq+Lk-1], built once per geometry
    Tensor table = geometry_cached("kerple_power.logd", g, [&] {
      std::vector<double> d = toeplitz_distances(g).to_vector<double>();
      const size_t n = d.size();
      std::vector<double> out(2 * n);
      for (size_t t = 0; t < n; ++t) {
        double a = std::abs(d[t]);
        out[t] = a >= 1 ? std::log(a) : 0.0;
        out[n + t] = a >= 1 ? 1.0 : 0.0;
      }
      return Tensor::from_vector(out, {2, int64_t(n)}).to(r1_.dtype());
    });
    Variable log_dist(table.narrow(0, 0, 1));  // [1, n]
    Variable keep(table.narrow(0, 1, 1));      // [1, n]
    Variable r2 = sigmoid(r2_) * 2.0;
    Variable powd = exp(r2 * log_dist) * keep;  // |d|^r2, exactly 0 at d = 0
    return neg(softplus(r1_) * powd);
  }

 private:
  Variable r1_, r2_;
};
}  // namespace

namespace {
PositionEncodingPtr make_kerple_power(const PositionConfig& cfg, Generator& gen) {
  std::vector<double> r1, r2;
  if (cfg.params.has("r1_init")) {
    double v = cfg.params.get_double("r1_init", 1.0);
    RELPOS_CHECK_CONFIG(v > 0, "position 'kerple_power': r1_init must be > 0, got {}", v);
    r1.assign(size_t(cfg.n_heads), v);
  } else {
    r1 = Tensor::rand({cfg.n_heads}, gen, DType::F64, 0.0, 1.0).to_vector<double>();
    for (auto& x : r1) x = std::max(x, 0.01);
  }
  if (cfg.params.has("r2_init")) {
    double v = cfg.params.get_double("r2_init", 1.0);
    RELPOS_CHECK_CONFIG(v > 0 && v < 2, "position 'kerple_power': r2_init must be in (0, 2), got {}", v);
    r2.assign(size_t(cfg.n_heads), v);
  } else {
    r2 = Tensor::rand({cfg.n_heads}, gen, DType::F64, 0.0, 2.0).to_vector<double>();
    for (auto& x : r2) x = std::clamp(x, 0.01, 1.99);
  }
  return std::make_shared<KerplePower>(r1, r2, cfg.dtype);
}
}  // namespace

PositionVariant kerple_power_encoding() {
  return {
      .name = "kerple_power",
      .description = "KERPLE power kernel -r1 |i-j|^r2, r1 > 0, 0 < r2 < 2 per head (Chi 2022)",
      .params = {param::real("r1_init", Computed{"U(0, 1) per head"}, "initial r1 > 0 of -r1 |i - j|^r2, all heads"),
                 param::real("r2_init", Computed{"U(0, 2) per head"}, "initial r2 in (0, 2), all heads")},
      .make = make_kerple_power,
      .fused_attention = true,
      .facts = {.distance_indexed = true}};
}

}  // namespace relpos::nn
