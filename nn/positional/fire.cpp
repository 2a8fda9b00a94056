// nn/positional/fire.cpp — FIRE, functional interpolation for relative positions (Li et al.
// 2023, arXiv 2310.04418; reference module FIRE in mcleish7/arithmetic
// cramming/architectures/embeddings.py, which follows the paper's appendix code).
//   psi(x) = log(|c x| + 1)                              c learnable (init 0.1)
//   L = |L_multiplier * init_L|                          L_multiplier learnable (init 1)
//   x_ij = psi(qi - kj) / (psi(max(L, qi)) + eps)        eps = 1e-6
//   bias[h, qi, kj] = MLP(x_ij)[h]                       MLP: Linear(1, w) + ReLU + Linear(w, H)
// NOT Toeplitz: the normaliser depends on the query position qi, not only on kj - qi, so the
// bias is a dense [H, Lq, Lk] grid from the absolute positions qi = q_offset + i,
// kj = k_offset + j (KV-cache steps and cross-attention offsets see their true positions).
// It enters through score_bias() as [H, Lq, Lk], broadcast over the batch and added after the
// 1/sqrt(d) scaling, so the logit receives exactly MLP(x), as in the paper — times the bias
// scale alpha when model.bias_scale is enabled, like every other additive bias.
// Causal in the paper (i >= j). Bidirectional: relpos uses |qi - kj| inside psi, exactly as
// the reference module (which applies abs() and no mask), so the encoder bias is symmetric in
// the distance but still normalised by the query position; x may then exceed 1 (kj > qi > L).
// One MLP per layer by default (registry per_layer), as in the paper; init like PyTorch
// nn.Linear, as the reference. The threshold max(L, qi) passes the gradient to L_multiplier
// only where L > qi (ties go to qi).
// Parameters: width (32), init_c (0.1), init_L (512), eps (1e-6).
#include <cmath>

#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/position_mlp.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

namespace {
class Fire : public PositionEncoding {
 public:
  Fire(int64_t heads, int64_t width, double init_c, double init_L, double eps, Generator& gen,
       DType dt)
      : heads_(heads), init_L_(init_L), eps_(eps), dtype_(dt) {
    mlp_ = register_module(
        "mlp", std::make_shared<PositionMlp>(std::vector<int64_t>{1, width, heads}, PositionMlp::Act::Relu, gen, dt));
    c_ = register_parameter("c", Tensor::full({1, 1}, init_c, dt), group::kPosition);
    l_mult_ = register_parameter("L_multiplier", Tensor::full({1, 1}, 1.0, dt), group::kPosition);
  }
  std::string type() const override { return "fire"; }

  // The bias [H, Lq, Lk] of the geometry's absolute positions.
  Variable dense_bias(const AttnGeometry& g) const {
    Variable relv(geometry_cached("fire.rel", g, [&] {  // qi - kj: [Lq, Lk]
      std::vector<double> rel(size_t(g.Lq * g.Lk));
      for (int64_t i = 0; i < g.Lq; ++i)
        for (int64_t j = 0; j < g.Lk; ++j) rel[size_t(i * g.Lk + j)] = double((g.q_offset + i) - (g.k_offset + j));
      return Tensor::from_vector(rel, {g.Lq, g.Lk}).to(dtype_);
    }));
    Variable qv(geometry_cached("fire.qpos", g, [&] {  // qi: [Lq, 1]
      std::vector<double> qpos(size_t(g.Lq));
      for (int64_t i = 0; i < g.Lq; ++i) qpos[size_t(i)] = double(g.q_offset + i);
      return Tensor::from_vector(qpos, {g.Lq, 1}).to(dtype_);
    }));
    Variable num = log(add(abs(c_ * relv), 1.0));             // psi(qi - kj): [Lq, Lk]
    Variable threshold = abs(l_mult_ * init_L_);              // [1, 1]
    Variable norm = where(gt(qv, threshold), qv, threshold);  // max(qi, L): [Lq, 1]
    Variable den = add(log(add(abs(c_ * norm), 1.0)), eps_);  // psi(max(qi, L)) + eps
    Variable x = reshape(num / den, {g.Lq * g.Lk, 1});
    return reshape(transpose(mlp_->forward(x), 0, 1), {heads_, g.Lq, g.Lk});
  }

  // [H, Lq, Lk], added after scaling (times alpha when enabled)
  Variable score_bias(const AttnGeometry& g) const override { return dense_bias(g); }

 private:
  int64_t heads_;
  double init_L_, eps_;
  DType dtype_;
  std::shared_ptr<PositionMlp> mlp_;
  Variable c_, l_mult_;
};
}  // namespace

namespace {
PositionEncodingPtr make_fire(const PositionConfig& cfg, Generator& gen) {
  const auto& p = cfg.params;
  int64_t width = p.get_int("width");
  double c = p.get_double("init_c"), L = p.get_double("init_L"), eps = p.get_double("eps");
  RELPOS_CHECK_CONFIG(width >= 1, "position 'fire': width must be >= 1, got {}", width);
  RELPOS_CHECK_CONFIG(c != 0, "position 'fire': init_c must be nonzero (psi would be 0 everywhere)");
  RELPOS_CHECK_CONFIG(L > 0, "position 'fire': init_L must be > 0, got {}", L);
  RELPOS_CHECK_CONFIG(eps > 0, "position 'fire': eps must be > 0, got {}", eps);
  return std::make_shared<Fire>(cfg.n_heads, width, c, L, eps, gen, cfg.dtype);
}
}  // namespace

PositionVariant fire_encoding() {
  return {.name = "fire",
          .description = "FIRE: MLP of log-distance normalised by the query position, learnable c, L (Li 2023)",
          .params = {param::integer("width", "32", "hidden width of the MLP 1 -> width -> H (ReLU)").at_most(1024),
                     param::real("init_c", "0.1", "initial c of psi(x) = log(|c x| + 1) (nonzero)"),
                     param::real("init_L", "512", "initial threshold L of the normaliser psi(max(L, i))"),
                     param::real("eps", "1e-6", "added to the normaliser")},
          .make = make_fire,
          .per_layer = true};
}

}  // namespace relpos::nn
