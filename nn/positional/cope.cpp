// nn/positional/cope.cpp — Contextual Position Encoding (Golovneva et al. 2024, "Contextual
// Position Encoding: Learning to Count What's Important", arXiv 2405.18719; the paper's
// appendix code, also x-transformers CoPE).
//   g_ij = sigmoid(s q_i . k_j)            gate, s = 1/sqrt(d); 0 for masked (future) keys
//   p_ij = sum_{t=j..i} g_it               contextual position (counts gated keys from j to i)
//   p_ij = min(p_ij, npos_max - 1)
//   z_i[r] = q_i . e[r]                    r = 0 .. npos_max-1, e: [npos_max, d] learnable
//   logit_ij += z_i[ceil p] w + z_i[floor p] (1 - w),   w = p - floor(p)
// Follows the paper's code exactly: the gates use the scaled logits after the causal mask
// (the paper's equation writes sigma(q_i . k_j) without the 1/sqrt(d); the code gates
// attn_logits / sqrt(d) + log(mask)), the interpolated term is added to the scaled logits
// unscaled, and e is one table per layer shared by all heads ([1, d, npos] in the code).
// Gradients flow into q and k through z and through the gates (via w only: floor and ceil are
// piecewise constant, as in the reference), and into e. Deviations: e is initialised
// N(0, init_std) (relpos' table convention) instead of the code's zeros; p is computed as
// g @ U with the constant upper-triangular U[t, j] = [t >= j] (no reverse cumsum op), and
// the causal mask comes from the absolute positions of the geometry, so KV-cache steps
// (Lq = 1 against all cached keys) are exact. Key padding is not seen by score terms: a
// padded key before the query would count in p (right padding is harmless under the causal
// mask). Causal only (the sum t = j..i needs j <= i); a score term [B, H, Lq, Lk], divided by
// score_scale before attention multiplies it back.
// Parameters: npos_max (16).
#include <cmath>

#include "autograd/ops.h"
#include "core/rng.h"
#include "kernels/ops.h"
#include "nn/init.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

namespace {
class CoPE : public PositionEncoding {
 public:
  CoPE(int64_t npos_max, int64_t head_dim, double std, Generator& gen, DType dt)
      : npos_max_(npos_max), head_dim_(head_dim) {
    table_ = register_parameter("table", init::normal({npos_max, head_dim}, std, gen, dt), group::kPosition);
  }
  std::string type() const override { return "cope"; }
  bool causal_only() const override { return true; }

  // q: [B, H, Lq, d], k: [B, H, Lk, d] -> [B, H, Lq, Lk]
  Variable score_terms(const Variable& q, const Variable& k, const AttnGeometry& g) const override {
    RELPOS_CHECK(g.causal, "position encoding 'cope' only works with causal attention");
    const double s = score_scale(head_dim_);
    const DType dt = q.dtype();
    // Gates on visible keys only (kj <= qi): the causal predicate, no mask tensor.
    Variable gates = causal_fill(sigmoid(matmul(q, transpose(k, -1, -2)) * s), g.q_offset, g.k_offset, 0.0);
    Variable upper(cached("cope.upper", {g.Lk}, [&] {  // u[t][j] = 1 for j <= t: [Lk, Lk]
      std::vector<double> u(size_t(g.Lk * g.Lk), 0.0);
      for (int64_t t = 0; t < g.Lk; ++t)
        for (int64_t j = 0; j <= t; ++j) u[size_t(t * g.Lk + j)] = 1.0;
      return Tensor::from_vector(u, {g.Lk, g.Lk}).to(dt);
    }));
    Variable p = clamp(matmul(gates, upper), 0.0, double(npos_max_ - 1));  // p_ij = sum_{t >= j} g_it

    // Interpolate between the integer positions around p (p >= 0, so the int64 cast of
    // floor/ceil is exact); all on p's device.
    const Tensor flo = k::unary(k::Unary::Floor, p.data());
    const Tensor lo_idx = flo.to(DType::I64), hi_idx = k::unary(k::Unary::Ceil, p.data()).to(DType::I64);
    Variable w = p - Variable(flo);  // p - floor(p)
    Variable z = matmul(q, transpose(table_, 0, 1));                    // [B, H, Lq, npos]
    Variable z_lo = gather(z, -1, lo_idx), z_hi = gather(z, -1, hi_idx);
    return (z_lo + w * (z_hi - z_lo)) * (1.0 / s);
  }

 private:
  int64_t npos_max_, head_dim_;
  Variable table_;
};
}  // namespace

namespace {
PositionEncodingPtr make_cope(const PositionConfig& cfg, Generator& gen) {
  int64_t n = cfg.params.get_int("npos_max");
  RELPOS_CHECK_CONFIG(n >= 2, "position 'cope': npos_max must be >= 2, got {}", n);
  return std::make_shared<CoPE>(n, cfg.head_dim, cfg.init_std, gen, cfg.dtype);
}
}  // namespace

PositionVariant cope_encoding() {
  return {
      .name = "cope",
      .description = "CoPE: gated contextual positions, interpolated embeddings; causal only (Golovneva 2024)",
      .params = {param::integer("npos_max", "16", "contextual positions 0 .. npos_max - 1; table [npos_max, head_dim]")
                     .rows()},
      .make = make_cope,
      .per_layer = true};
}

}  // namespace relpos::nn
