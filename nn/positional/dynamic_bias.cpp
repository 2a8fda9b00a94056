// nn/positional/dynamic_bias.cpp — dynamic position bias (x-transformers
// DynamicPositionBias, after the continuous position bias of Swin v2 / CoaT-style MLP biases).
//   x = qi - kj                          (query minus key: x-transformers' `i - j` sign)
//   x = sign(x) log(|x| + 1)             if log_distance
//   bias[h, qi, kj] = MLP(x)[h]          MLP: Linear(1, w) + SiLU,
//                                             (depth - 1) x (Linear(w, w) + SiLU), Linear(w, H)
// Toeplitz form: the MLP runs once on the Lq + Lk - 1 distances of the call (not on a
// [Lq, Lk] grid) and attention adds the result after the 1/sqrt(d) scaling. Signed input, so
// it tells left from right, in causal and bidirectional attention alike. One MLP per layer
// (position_shared=false) or per stack. Linear layers initialised like PyTorch nn.Linear (as
// the reference); x-transformers' optional LayerNorm inside the MLP is not implemented.
// Parameters: depth (2), width (default max(d_model / 4, 1), x-transformers' dim // 4),
// log_distance (false).
#include <cmath>

#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/position_mlp.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

namespace {
class DynamicBias : public PositionEncoding {
 public:
  DynamicBias(int64_t heads, int64_t depth, int64_t width, bool log_distance, Generator& gen, DType dt)
      : log_distance_(log_distance), dtype_(dt) {
    std::vector<int64_t> widths{1};
    for (int64_t i = 0; i < depth; ++i) widths.push_back(width);
    widths.push_back(heads);
    mlp_ = register_module("mlp", std::make_shared<PositionMlp>(widths, PositionMlp::Act::Silu, gen, dt));
  }
  std::string type() const override { return "dynamic_bias"; }

  Variable toeplitz_bias(const AttnGeometry& g) const override {  // [H, Lq + Lk - 1]
    Variable in(geometry_cached("dynamic_bias.in", g, [&] {  // [Lq+Lk-1, 1]
      std::vector<double> x = toeplitz_distances(g).to_vector<double>();
      for (auto& v : x) {
        v = -v;  // kj - qi -> qi - kj
        if (log_distance_) v = (v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0) * std::log(std::abs(v) + 1.0);
      }
      return Tensor::from_vector(x, {int64_t(x.size()), 1}).to(dtype_);
    }));
    return transpose(mlp_->forward(in), 0, 1);  // [n, H] -> [H, n]
  }

 private:
  bool log_distance_;
  DType dtype_;
  std::shared_ptr<PositionMlp> mlp_;
};
}  // namespace

namespace {
PositionEncodingPtr make_dynamic_bias(const PositionConfig& cfg, Generator& gen) {
  const auto& p = cfg.params;
  int64_t depth = p.get_int("depth");
  int64_t width = p.get_int("width", std::max<int64_t>(cfg.d_model / 4, 1));
  RELPOS_CHECK_CONFIG(depth >= 1, "position 'dynamic_bias': depth must be >= 1, got {}", depth);
  RELPOS_CHECK_CONFIG(width >= 1, "position 'dynamic_bias': width must be >= 1, got {}", width);
  return std::make_shared<DynamicBias>(cfg.n_heads, depth, width, p.get_bool("log_distance"), gen, cfg.dtype);
}
}  // namespace

PositionVariant dynamic_bias_encoding() {
  return {.name = "dynamic_bias",
          .description = "MLP over the (optionally log) signed distance, per head (x-transformers DPB)",
          .params = {param::integer("depth", "2", "hidden layers of the MLP (SiLU)").at_most(64),
                     param::integer("width", Computed{"max(d_model / 4, 1)"}, "hidden width of the MLP").at_most(1024),
                     param::flag("log_distance", "false", "feed sign(x) log(|x| + 1) instead of x = i - j")},
          .make = make_dynamic_bias,
          .fused_attention = true,
          .facts = {.distance_indexed = true}};
}

}  // namespace relpos::nn
