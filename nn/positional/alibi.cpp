// nn/positional/alibi.cpp — ALiBi (Press et al. 2022; reference get_slopes in
// ofirpress/attention_with_linear_biases and HF Bloom build_alibi_tensor).
//   slopes: for H a power of two, m_h = s^(h+1) with s = 2^(-8/H); otherwise the reference
//   interleave: slopes(2^floor(log2 H)) followed by every second slope of slopes(2 * that),
//   e.g. H = 12: 2^-1 .. 2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
//   causal (decoder):   bias[h, i, j] = -m_h (qi - kj)    (= m_h (kj - qi); future keys masked)
//   bidirectional:      bias[h, i, j] = -m_h |qi - kj|    (symmetric form for encoders)
// Added after the 1/sqrt(d) scaling, unscaled (as in Bloom). Parameters: learnable (false):
// make the slopes a trainable [H] parameter initialised to the reference values.
#include <cmath>

#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/positional/alibi_slopes.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

std::vector<double> alibi_slopes(int64_t n) {
  RELPOS_CHECK(n > 0, "alibi: number of heads must be positive, got {}", n);
  auto power_of_two = [](int64_t m) {
    double start = std::pow(2.0, -8.0 / double(m));
    std::vector<double> s(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) s[size_t(i)] = std::pow(start, double(i + 1));
    return s;
  };
  int64_t c = 1;
  while (c * 2 <= n) c *= 2;
  if (c == n) return power_of_two(n);
  std::vector<double> s = power_of_two(c);
  std::vector<double> extra = alibi_slopes(2 * c);
  for (int64_t i = 0; i < n - c; ++i) s.push_back(extra[size_t(2 * i)]);
  return s;
}

namespace {
class Alibi : public PositionEncoding {
 public:
  Alibi(int64_t heads, bool learnable, DType dt) {
    Tensor s = Tensor::from_vector(alibi_slopes(heads), {heads}).to(dt);
    slopes_ = learnable ? register_parameter("slopes", s, group::kPosition) : register_buffer("slopes", s);
  }
  std::string type() const override { return "alibi"; }

  Variable toeplitz_bias(const AttnGeometry& g) const override {
    Variable dist(geometry_cached("alibi.dist", g, [&] {  // [1, Lq+Lk-1]
      std::vector<double> d = toeplitz_distances(g).to_vector<double>();
      for (auto& x : d) x = g.causal ? x : -std::abs(x);  // m (kj - qi) or -m |kj - qi|
      return Tensor::from_vector(d, {1, int64_t(d.size())}).to(slopes_.dtype());
    }));
    return mul(unsqueeze(slopes_, 1), dist);  // [H, 1] * [1, Lq+Lk-1]
  }

 private:
  Variable slopes_;
};
}  // namespace

namespace {
PositionEncodingPtr make_alibi(const PositionConfig& cfg, Generator&) {
  return std::make_shared<Alibi>(cfg.n_heads, cfg.params.get_bool("learnable"), cfg.dtype);
}
}  // namespace

PositionVariant alibi_encoding() {
  return {.name = "alibi",
          .description = "ALiBi linear distance bias with reference slopes (Press 2022)",
          .params = {param::flag("learnable", "false",
                                 "make the per-head slopes a trained parameter (stored `slopes` [H])")},
          .make = make_alibi,
          .fused_attention = true,
          .facts = {.distance_indexed = true}};
}

}  // namespace relpos::nn
