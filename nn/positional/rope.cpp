// nn/positional/rope.cpp — rotary position embedding (Su et al. 2021; HF Llama
// apply_rotary_pos_emb / GPT-J rotate_every_two; scaling from HF modeling_rope_utils).
// The first r = fraction * head_dim channels of q and k are rotated, the rest pass through.
// Pair p in [0, r/2) with frequency inv_freq[p] at position m turns (a, b) into
//   (a cos(m w_p) - b sin(m w_p),  a sin(m w_p) + b cos(m w_p))
// pairs: style=half        -> (p, p + r/2)   (GPT-NeoX / HF Llama "rotate_half")
//        style=interleaved -> (2p, 2p + 1)   (GPT-J, Meta Llama)
// inv_freq[p] = base^(-2p/r), then scaling:
//   linear: inv_freq /= factor (position interpolation)
//   ntk:    base' = base * factor^(r / (r - 2)) (NTK-aware, static)
//   yarn:   blend of inv_freq and inv_freq / factor with a linear ramp over pair index
//           between low = floor(r ln(L0 / (beta_fast 2 pi)) / (2 ln base)) and
//           high = ceil(r ln(L0 / (beta_slow 2 pi)) / (2 ln base)) (clamped to [0, r-1]);
//           ramp 0 keeps the frequency, 1 interpolates; cos and sin are multiplied by
//           mscale = 0.1 ln(factor) + 1.
// Angles are computed in float64. q.k then depends only on m - n. No parameters.
// Parameters: base (10000), fraction (1.0), style (half|interleaved), scaling
// (none|linear|ntk|yarn), factor (1.0), original_max_len (model max_len), beta_fast (32),
// beta_slow (1).
// set_eval_scaling({scaling, factor, original_max_len, beta_fast, beta_slow}) switches the
// scaling of an existing (trained) instance for evaluation; keys not given keep their value.
// factor 1 leaves every frequency unchanged. Keys already in a KV cache keep their rotation.
#include <cmath>
#include <numbers>

#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"
#include "nn/positional/rope_freqs.h"

namespace relpos::nn {

RopeFrequencies rope_frequencies(const RopeSettings& s) {
  RELPOS_CHECK(s.rot_dim >= 2 && s.rot_dim % 2 == 0, "rope: rotary dims must be even and >= 2, got {}", s.rot_dim);
  const int64_t half = s.rot_dim / 2;
  double base = s.base;
  if (s.scaling == "ntk") base = s.base * std::pow(s.factor, double(s.rot_dim) / double(s.rot_dim - 2));
  RopeFrequencies f;
  f.inv_freq.resize(size_t(half));
  for (int64_t p = 0; p < half; ++p) f.inv_freq[size_t(p)] = std::pow(base, -2.0 * double(p) / double(s.rot_dim));
  if (s.scaling == "linear")
    for (auto& w : f.inv_freq) w /= s.factor;
  if (s.scaling == "yarn") {
    auto corr = [&](double beta) {
      return double(s.rot_dim) * std::log(double(s.original_max_len) / (beta * 2 * std::numbers::pi)) /
             (2 * std::log(s.base));
    };
    double low = std::max(std::floor(corr(s.beta_fast)), 0.0);
    double high = std::min(std::ceil(corr(s.beta_slow)), double(s.rot_dim - 1));
    if (low == high) high += 0.001;  // avoid a zero-width ramp
    for (int64_t p = 0; p < half; ++p) {
      double ramp = std::clamp((double(p) - low) / (high - low), 0.0, 1.0);
      double w = f.inv_freq[size_t(p)];
      f.inv_freq[size_t(p)] = (w / s.factor) * ramp + w * (1 - ramp);
    }
    f.mscale = 0.1 * std::log(s.factor) + 1.0;
  }
  return f;
}

namespace {
class Rope : public PositionEncoding {
 public:
  explicit Rope(RopeSettings s) : s_(std::move(s)), f_(rope_frequencies(s_)) {}
  std::string type() const override { return "rope"; }
  void set_eval_scaling(const PositionParams& p) override;

  // x: [B, H, L, dh] at positions offset .. offset + L - 1
  Variable rotate(const Variable& x, int64_t offset) const override {
    const int64_t L = x.size(2), r = s_.rot_dim, half = r / 2;
    // cos and sin of every (position, pair): [2, L, r/2], built once per (L, offset, dtype)
    Tensor table = cached("rope.cos_sin", {L, offset, int64_t(x.dtype())}, [&] {
      std::vector<double> cs(size_t(2 * L * half));
      for (int64_t m = 0; m < L; ++m)
        for (int64_t p = 0; p < half; ++p) {
          double ang = double(offset + m) * f_.inv_freq[size_t(p)];
          cs[size_t(m * half + p)] = std::cos(ang) * f_.mscale;
          cs[size_t((L + m) * half + p)] = std::sin(ang) * f_.mscale;
        }
      return Tensor::from_vector(cs, {2, L, half}).to(x.dtype());
    });
    return relpos::rotary(x, table, s_.style != "half");  // one pass; channels past r pass through
  }

 private:
  RopeSettings s_;
  RopeFrequencies f_;
};

const ParamSchema& rope_params() {
  static const ParamSchema p = {
      param::real("base", "10000", "frequency base: inv_freq[p] = base^(-2p/r)"),
      param::real("fraction", "1", "fraction of head_dim rotated (r = floor(fraction head_dim / 2) * 2)"),
      param::choice("style", {"half", "interleaved"}, "half", "pairs (p, p + r/2) (GPT-NeoX) or (2p, 2p + 1) (GPT-J)"),
      param::choice("scaling", {"none", "linear", "ntk", "yarn"}, "none", "context scaling of the frequencies"),
      param::real("factor", "1", "scaling factor (>= 1)"),
      param::integer("original_max_len", Computed{"model.max_len"}, "YaRN's original context length L0"),
      param::real("beta_fast", "32", "YaRN ramp: fast boundary"),
      param::real("beta_slow", "1", "YaRN ramp: slow boundary")};
  return p;
}

// The scaling keys (make_rope and set_eval_scaling); absent keys keep s's value.
void read_scaling(const PositionParams& p, RopeSettings& s) {
  s.scaling = p.get_choice("scaling", s.scaling);
  s.factor = p.get_double("factor", s.factor);
  RELPOS_CHECK_CONFIG(s.factor >= 1.0, "position 'rope': factor must be >= 1, got {}", s.factor);
  s.original_max_len = p.get_int("original_max_len", s.original_max_len);
  RELPOS_CHECK_CONFIG(s.original_max_len > 0, "position 'rope': original_max_len must be positive, got {}",
                      s.original_max_len);
  s.beta_fast = p.get_double("beta_fast", s.beta_fast);
  s.beta_slow = p.get_double("beta_slow", s.beta_slow);
}

void Rope::set_eval_scaling(const PositionParams& p) {
  const std::string context = "position 'rope' eval scaling";
  p.check_known(context, {"scaling", "factor", "original_max_len", "beta_fast", "beta_slow"});
  RopeSettings s = s_;
  read_scaling(p.bind(rope_params(), context), s);
  f_ = rope_frequencies(s);
  s_ = std::move(s);
  clear_geometry_cache();  // cos/sin tables of the old frequencies
}

PositionEncodingPtr make_rope(const PositionConfig& cfg, Generator&) {
  const auto& p = cfg.params;
  RopeSettings s;
  s.base = p.get_double("base");
  double fraction = p.get_double("fraction");
  RELPOS_CHECK_CONFIG(fraction > 0 && fraction <= 1, "position 'rope': fraction must be in (0, 1], got {}", fraction);
  s.rot_dim = int64_t(double(cfg.head_dim) * fraction) / 2 * 2;
  RELPOS_CHECK_CONFIG(s.rot_dim >= 2, "position 'rope': fraction {} of head_dim {} leaves no rotary pair", fraction,
                      cfg.head_dim);
  s.style = p.get_choice("style");
  RELPOS_CHECK_CONFIG(s.base > 1.0, "position 'rope': base must be > 1, got {}", s.base);
  s.scaling = p.get_choice("scaling");
  s.factor = p.get_double("factor");
  s.original_max_len = cfg.max_len > 0 ? cfg.max_len : 2048;
  s.beta_fast = p.get_double("beta_fast");
  s.beta_slow = p.get_double("beta_slow");
  read_scaling(p, s);  // the checks; original_max_len when given
  return std::make_shared<Rope>(s);
}
}  // namespace

PositionVariant rope_encoding() {
  return {.name = "rope",
          .description = "rotary embedding of q and k; half/interleaved, linear/NTK/YaRN scaling (Su 2021)",
          .params = rope_params(),
          .make = make_rope,
          .fused_attention = true,
          .facts = {.no_bias_note = kRotaryNote}};
}

}  // namespace relpos::nn
