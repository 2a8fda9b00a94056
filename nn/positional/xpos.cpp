// nn/positional/xpos.cpp — xPos, RoPE with an exponential decay (Sun et al. 2022, "A
// Length-Extrapolatable Transformer"; reference torchscale XPOS and x-transformers
// RotaryEmbedding(use_xpos)).
//   theta_p = base^(-2p/d),  zeta_p = (2p/d + gamma) / (1 + gamma)      pair p = 0 .. d/2-1
//   q at position m: R(m theta) q * zeta^( m / scale_base)             rotate()
//   k at position n: R(n theta) k * zeta^(-n / scale_base)             rotate_key()
//   q_m . k_n = sum_p zeta_p^((m - n)/scale_base) (R((m - n) theta_p) ...)   relative only
// R is the RoPE rotation of pair p; pairs: style=interleaved (2p, 2p+1), torchscale's
// rotate_every_two (default), or style=half (p, p + d/2), x-transformers' rotate_half.
// zeta_p < 1, so scores decay with m - n >= 0: the encoding needs the causal mask (a future
// key n > m would be amplified), causal_only() = true.
// Positions: the references centre the scale exponent (torchscale: position - (L+offset)//2)
// to keep zeta^(+-pos) in range; the centre cancels in q.k. relpos uses the absolute positions
// unshifted, so a cached key keeps its factor and KV-cache decoding stays exact. The factors
// are computed in float64; a float32 model is rejected once zeta_min^(-n/scale_base) would
// overflow (n beyond ~36k positions with the defaults).
// Parameters: base (10000), scale_base (512), gamma (0.4), style (interleaved|half).
#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

namespace {
class XPos : public PositionEncoding {
 public:
  XPos(double base, double scale_base, double gamma, std::string style, int64_t head_dim)
      : scale_base_(scale_base), style_(std::move(style)), head_dim_(head_dim) {
    const int64_t half = head_dim / 2;
    for (int64_t p = 0; p < half; ++p) {
      double f = double(2 * p) / double(head_dim);
      inv_freq_.push_back(std::pow(base, -f));
      zeta_.push_back((f + gamma) / (1.0 + gamma));
    }
  }
  std::string type() const override { return "xpos"; }
  bool causal_only() const override { return true; }

  Variable rotate(const Variable& x, int64_t offset) const override { return apply(x, offset, 1.0); }
  Variable rotate_key(const Variable& x, int64_t offset) const override { return apply(x, offset, -1.0); }

 private:
  // x: [B, H, L, d] at positions offset.. -> R(m theta) x * zeta^(sign m / scale_base)
  Variable apply(const Variable& x, int64_t offset, double sign) const {
    const int64_t L = x.size(2), half = head_dim_ / 2;
    // scaled cos and sin of every (position, pair): [2, L, d/2], once per (L, offset, side, dtype)
    Tensor table = cached("xpos.cos_sin", {L, offset, sign > 0 ? 1 : -1, int64_t(x.dtype())}, [&] {
      std::vector<double> cs(size_t(2 * L * half));
      for (int64_t m = 0; m < L; ++m)
        for (int64_t p = 0; p < half; ++p) {
          const double pos = double(offset + m), ang = pos * inv_freq_[size_t(p)];
          const double scale = std::pow(zeta_[size_t(p)], sign * pos / scale_base_);
          RELPOS_CHECK(x.dtype() != DType::F32 || scale < double(std::numeric_limits<float>::max()),
                       "xpos: the decay factor at position {} overflows float32 (scale_base {}); use float64 or a "
                       "larger scale_base",
                       offset + m, scale_base_);
          cs[size_t(m * half + p)] = std::cos(ang) * scale;
          cs[size_t((L + m) * half + p)] = std::sin(ang) * scale;
        }
      return Tensor::from_vector(cs, {2, L, half}).to(x.dtype());
    });
    Variable cos(table.select(0, 0)), sin(table.select(0, 1));
    Variable a, b;  // the two members of every pair: [B, H, L, d/2]
    if (style_ == "half") {
      a = narrow(x, -1, 0, half);
      b = narrow(x, -1, half, half);
    } else {
      Variable xr = reshape(x, {x.size(0), x.size(1), L, half, 2});
      a = select(xr, -1, 0);
      b = select(xr, -1, 1);
    }
    Variable ra = a * cos - b * sin;
    Variable rb = a * sin + b * cos;
    if (style_ == "half") return cat({ra, rb}, -1);
    return reshape(cat({unsqueeze(ra, -1), unsqueeze(rb, -1)}, -1), {x.size(0), x.size(1), L, head_dim_});
  }

  double scale_base_;
  std::string style_;
  int64_t head_dim_;
  std::vector<double> inv_freq_, zeta_;
};
}  // namespace

namespace {
PositionEncodingPtr make_xpos(const PositionConfig& cfg, Generator&) {
  const auto& p = cfg.params;
  double base = p.get_double("base"), sb = p.get_double("scale_base"), gamma = p.get_double("gamma");
  RELPOS_CHECK_CONFIG(base > 1.0, "position 'xpos': base must be > 1, got {}", base);
  RELPOS_CHECK_CONFIG(sb > 0, "position 'xpos': scale_base must be > 0, got {}", sb);
  RELPOS_CHECK_CONFIG(gamma > 0, "position 'xpos': gamma must be > 0, got {}", gamma);
  RELPOS_CHECK_CONFIG(cfg.head_dim % 2 == 0, "position 'xpos': head_dim must be even, got {}", cfg.head_dim);
  return std::make_shared<XPos>(base, sb, gamma, p.get_choice("style"), cfg.head_dim);
}
}  // namespace

PositionVariant xpos_encoding() {
  return {.name = "xpos",
          .description = "xPos: RoPE with exponential decay zeta^((m-n)/scale_base); causal only (Sun 2022)",
          .params = {param::real("base", "10000", "rotation frequency base"),
                     param::real("scale_base", "512", "decay exponent divisor: zeta^(m / scale_base)"),
                     param::real("gamma", "0.4", "zeta_p = (2p/d + gamma) / (1 + gamma)"),
                     param::choice("style", {"interleaved", "half"}, "interleaved",
                                   "rotation pairs (2p, 2p + 1) or (p, p + d/2)")},
          .make = make_xpos,
          .fused_attention = true,
          .facts = {.no_bias_note = kRotaryNote}};
}

}  // namespace relpos::nn
