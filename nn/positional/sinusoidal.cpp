// nn/positional/sinusoidal.cpp — fixed sinusoidal absolute encoding (Vaswani et al. 2017),
// added to the token embeddings, paper layout (interleaved):
//   PE[pos, 2i] = sin(pos * base^(-2i/D)),  PE[pos, 2i+1] = cos(pos * base^(-2i/D))
// Parameters: base (default 10000). Positions start at the given offset (KV-cache decoding).
#include <cmath>

#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

namespace {
class Sinusoidal : public PositionEncoding {
 public:
  Sinusoidal(int64_t d_model, double base) : d_(d_model), base_(base) {}
  std::string type() const override { return "sinusoidal"; }
  bool is_absolute() const override { return true; }

  Variable embed(const Variable& x, int64_t offset) const override {  // x: [B, L, D]
    const int64_t L = x.size(1);
    Tensor pe = cached("sinusoidal.pe", {L, offset, int64_t(x.dtype())}, [&] {  // [L, D]
      std::vector<double> v(size_t(L * d_));
      for (int64_t p = 0; p < L; ++p)
        for (int64_t i = 0; 2 * i < d_; ++i) {
          double ang = double(offset + p) * std::pow(base_, -2.0 * double(i) / double(d_));
          v[size_t(p * d_ + 2 * i)] = std::sin(ang);
          if (2 * i + 1 < d_) v[size_t(p * d_ + 2 * i + 1)] = std::cos(ang);
        }
      return Tensor::from_vector(v, {L, d_}).to(x.dtype());
    });
    return x + Variable(pe);
  }

 private:
  int64_t d_;
  double base_;
};
}  // namespace

namespace {
PositionEncodingPtr make_sinusoidal(const PositionConfig& cfg, Generator&) {
  double base = cfg.params.get_double("base");
  RELPOS_CHECK_CONFIG(base > 1.0, "position 'sinusoidal': base must be > 1, got {}", base);
  return std::make_shared<Sinusoidal>(cfg.d_model, base);
}
}  // namespace

PositionVariant sinusoidal_encoding() {
  return {.name = "sinusoidal",
          .description = "fixed sinusoidal absolute encoding added to the embeddings (Vaswani 2017)",
          .params = {param::real("base", "10000",
                                 "frequency base: PE[p, 2i] = sin(p base^(-2i/D)), PE[p, 2i+1] = cos(..)")},
          .make = make_sinusoidal,
          .fused_attention = true};
}

}  // namespace relpos::nn
