// nn/positional/sandwich.cpp — Sandwich (Chi et al. 2023, "Dissecting Transformer Length
// Extrapolation via the Lens of Receptive Field Analysis"; reference NVIDIA/NeMo
// megatron/position_embedding/sandwich_relative_position_embedding.py).
//   bias[h, qi, kj] = (sum_{p=1..d'/2} cos((kj - qi) / 10000^(2p/d')) - d'/2) / ((h+1) * 8 / H)
// i.e. the inner product of the sinusoidal embeddings of qi and kj (which depends only on the
// distance), shifted so distance 0 gives 0 (every other distance gives < 0), and divided per
// head by the ALiBi-like ratio (h+1) 8/H for heads h = 0..H-1 — the form of the NeMo code,
// which the paper leaves implicit ("compression ratio" per head). p runs 1..d'/2 as in NeMo
// (so the slowest frequency is 10000^-1, not 10000^0). cos is even, so the sign convention is
// irrelevant and the bidirectional bias is the symmetric one; NeMo's causal form (tril) only
// differs on masked cells. Parameter-free; Toeplitz form, added after the 1/sqrt(d) scaling.
// Parameters: dim (d', even; default head_dim — NeMo's hidden_size is "per attention head").
#include <cmath>

#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

namespace {
class Sandwich : public PositionEncoding {
 public:
  Sandwich(int64_t heads, int64_t dim, DType dt) : heads_(heads), dim_(dim), dtype_(dt) {}
  std::string type() const override { return "sandwich"; }

  Variable toeplitz_bias(const AttnGeometry& g) const override {  // [H, Lq + Lk - 1]
    return Variable(geometry_cached("sandwich.bias", g, [&] {  // fixed: [H, Lq+Lk-1]
      std::vector<double> d = toeplitz_distances(g).to_vector<double>();
      const int64_t n = int64_t(d.size());
      std::vector<double> out(size_t(heads_ * n));
      for (int64_t t = 0; t < n; ++t) {
        double s = 0;
        for (int64_t p = 1; p <= dim_ / 2; ++p)
          s += std::cos(d[size_t(t)] * std::pow(10000.0, -2.0 * double(p) / double(dim_)));
        s -= double(dim_) / 2.0;
        for (int64_t h = 0; h < heads_; ++h) out[size_t(h * n + t)] = s / (double(h + 1) * 8.0 / double(heads_));
      }
      return Tensor::from_vector(out, {heads_, n}).to(dtype_);
    }));
  }

 private:
  int64_t heads_, dim_;
  DType dtype_;
};
}  // namespace

namespace {
PositionEncodingPtr make_sandwich(const PositionConfig& cfg, Generator&) {
  int64_t dim = cfg.params.get_int("dim", cfg.head_dim);
  RELPOS_CHECK_CONFIG(dim >= 2 && dim % 2 == 0, "position 'sandwich': dim must be even and >= 2, got {}", dim);
  return std::make_shared<Sandwich>(cfg.n_heads, dim, cfg.dtype);
}
}  // namespace

PositionVariant sandwich_encoding() {
  return {.name = "sandwich",
          .description = "Sandwich: parameter-free sum of cosines of the distance, per-head ratio (Chi 2023)",
          .params = {param::integer("dim", Computed{"head_dim"}, "d' of the sinusoid sum (even)").rows()},
          .make = make_sandwich,
          .fused_attention = true,
          .facts = {.distance_indexed = true}};
}

}  // namespace relpos::nn
