// nn/positional/transformer_xl.cpp — Transformer-XL relative attention (Dai et al. 2019,
// "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context", eq. 4; reference
// kimiyoung/transformer-xl pytorch/mem_transformer.py RelPartialLearnableMultiHeadAttn,
// PositionalEmbedding, MemTransformerLM; HF TransfoXL).
//   S_ij = s * [ (q_i + u) . k_j  +  (q_i + v) . r_{d_ij} ]        s = 1/sqrt(head_dim)
//   d_ij = qi - kj   (query minus key, TXL's sign: distances of visible keys are >= 0)
//   r_d  = (R_d W_r) split into heads, R_d = [sin(d w_0..w_{D/2-1}) | cos(d w_0..)] (D = d_model,
//          concatenated layout, w_i = 10000^(-2i/D)); with clamp_len >= 0, d -> min(d, clamp_len)
// score_terms() returns u . k_j + (q_i + v) . r_{d_ij}; attention adds q_i . k_j and scales
// the sum (TXL scales AC + BD). The learnable bias scale (alpha) does not apply: these are
// content-position terms, not an additive bias.
//
// Parameters: u, v [H, head_dim] (r_w_bias, r_r_bias); W_r [D, H*head_dim] (r_net, stored
// input-major so r = R @ W_r). All in the position group, init N(0, init_std) (TXL: 0.02).
// Sharing: in a stack that shares its encoding (position_shared, the default) u and v are
// global to the stack ("pos.u", "pos.v") and every layer gets its own W_r through make_layer()
// ("layers.N.attn.pos.w_r"), as in the reference. position_shared=false gives every layer
// its own u, v and W_r (TXL's untie_r). Built on its own (a single attention layer), the
// instance holds all three.
//
// Position term by gather, not the relative shift: BD_raw = (q + v) @ r^T over the distinct
// distances lo..hi of this geometry ([B, H, Lq, hi-lo+1]), then BD[i, j] = BD_raw[i, d_ij - lo].
// Positions are the absolute offsets (qi = q_offset + i, kj = k_offset + j), so segment memory
// (keys at 0.., queries at mem_len..) and KV-cache decoding need no special case. Equal to
// TXL's _rel_shift (pos_seq = klen-1 .. 0) on every visible cell; the test checks this.
// Future keys (d_ij < 0) are masked because the encoding is causal-only; their cells use
// distance 0 (clamped) so they hold finite values, and they get no gradient (P = 0 there).
// Causal only: TXL is a decoder design (and its shift trick is invalid unmasked); bidirectional
// use is rejected by attention and by the model stacks.
// Parameters: clamp_len (-1 = off). Not implemented: dropout on R, same_length masking.
#include <algorithm>
#include <cmath>

#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/init.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

namespace {

struct TxlSizes {
  int64_t d_model, n_heads, head_dim, clamp_len;
  double init_std;
  DType dtype;
};

class TransformerXL : public PositionEncoding {
 public:
  // Full: u, v and W_r (standalone, or one untied layer). Global: u, v only (a stack's shared
  // instance). Layer: W_r only, with the given u, v of the stack's Global instance.
  enum class Part { Full, Global, Layer };

  TransformerXL(Part part, const TxlSizes& s, Generator& gen, Variable u = {}, Variable v = {})
      : part_(part), s_(s) {
    if (part == Part::Layer) {
      u_ = std::move(u);
      v_ = std::move(v);
    } else {
      u_ = register_parameter("u", init::normal({s.n_heads, s.head_dim}, s.init_std, gen, s.dtype), group::kPosition);
      v_ = register_parameter("v", init::normal({s.n_heads, s.head_dim}, s.init_std, gen, s.dtype), group::kPosition);
    }
    if (part != Part::Global)
      w_r_ = register_parameter("w_r", init::normal({s.d_model, s.n_heads * s.head_dim}, s.init_std, gen, s.dtype),
                                group::kPosition);
  }

  std::string type() const override { return "transformer_xl"; }
  bool causal_only() const override { return true; }

  PositionEncodingPtr make_layer(Generator& gen) const override {
    if (part_ != Part::Global) return nullptr;
    return std::make_shared<TransformerXL>(Part::Layer, s_, gen, u_, v_);
  }

  // q: [B, H, Lq, dh], k: [B, H, Lk, dh] -> [B, H, Lq, Lk]
  Variable score_terms(const Variable& q, const Variable& k, const AttnGeometry& g) const override {
    RELPOS_CHECK(w_r_.defined(),
                 "position 'transformer_xl': this is a stack's shared part (u, v); layers use make_layer()");
    RELPOS_CHECK(g.causal, "position 'transformer_xl' is causal-only (distances qi - kj >= 0); got bidirectional "
                           "attention");
    const int64_t H = s_.n_heads, dh = s_.head_dim;
    // Not a structured binding: clang < 16 cannot capture those in the lambdas below.
    const std::pair<int64_t, int64_t> range = distance_range(g);
    const int64_t lo = range.first, hi = range.second;
    const int64_t n = hi - lo + 1;
    // r: [n, D] @ [D, H*dh] -> [n, H, dh] -> [H, dh, n]
    Variable sin_table(cached("txl.sinusoids", {lo, n, int64_t(q.dtype())}, [&] { return sinusoids(lo, n).to(q.dtype()); }));
    Variable r = permute(reshape(matmul(sin_table, w_r_), {n, H, dh}), {1, 2, 0});
    Variable bd_raw = matmul(q + reshape(v_, {1, H, 1, dh}), r);  // [B, H, Lq, n]
    Tensor idx = geometry_cached("txl.index", g, [&] { return distance_index(g, lo, hi); })
                     .expand({q.size(0), q.size(1), g.Lq, g.Lk});
    Variable bd = gather(bd_raw, -1, idx);                                         // [B, H, Lq, Lk]
    Variable uk = transpose(matmul(k, reshape(u_, {H, dh, 1})), -1, -2);           // [B, H, 1, Lk]
    return bd + uk;
  }

  // For `relpos bias`: the distance whose embedding each cell uses (future keys: 0).
  Tensor bias_index(const AttnGeometry& g) const override {
    std::vector<int64_t> d(size_t(g.Lq * g.Lk));
    for (int64_t i = 0; i < g.Lq; ++i)
      for (int64_t j = 0; j < g.Lk; ++j) d[size_t(i * g.Lk + j)] = clamp_distance(distance(g, i, j));
    return Tensor::from_vector(d, {g.Lq, g.Lk});
  }

 private:
  static int64_t distance(const AttnGeometry& g, int64_t i, int64_t j) {
    return (g.q_offset + i) - (g.k_offset + j);
  }
  int64_t clamp_distance(int64_t d) const {
    d = std::max<int64_t>(d, 0);
    return s_.clamp_len >= 0 ? std::min(d, s_.clamp_len) : d;
  }
  // The distances present among this geometry's cells, after clamping: [lo, hi].
  std::pair<int64_t, int64_t> distance_range(const AttnGeometry& g) const {
    const int64_t lo = clamp_distance(distance(g, 0, g.Lk - 1)), hi = clamp_distance(distance(g, g.Lq - 1, 0));
    return {lo, hi};
  }
  // int64 [Lq, Lk]: clamped distance minus lo, the column of BD_raw each cell reads.
  Tensor distance_index(const AttnGeometry& g, int64_t lo, int64_t) const {
    std::vector<int64_t> idx(size_t(g.Lq * g.Lk));
    for (int64_t i = 0; i < g.Lq; ++i)
      for (int64_t j = 0; j < g.Lk; ++j) idx[size_t(i * g.Lk + j)] = clamp_distance(distance(g, i, j)) - lo;
    return Tensor::from_vector(idx, {g.Lq, g.Lk});
  }
  // float64 [n, D]: row e is R at distance lo + e, [sin | cos] with w_i = 10000^(-2i/D).
  Tensor sinusoids(int64_t lo, int64_t n) const {
    const int64_t D = s_.d_model, half = D / 2;
    std::vector<double> out(size_t(n * D));
    for (int64_t e = 0; e < n; ++e)
      for (int64_t i = 0; i < half; ++i) {
        const double ang = double(lo + e) * std::pow(10000.0, -2.0 * double(i) / double(D));
        out[size_t(e * D + i)] = std::sin(ang);
        out[size_t(e * D + half + i)] = std::cos(ang);
      }
    return Tensor::from_vector(out, {n, D});
  }

  Part part_;
  TxlSizes s_;
  Variable u_, v_, w_r_;
};

}  // namespace

namespace {
PositionEncodingPtr make_transformer_xl(const PositionConfig& cfg, Generator& gen) {
  const int64_t clamp_len = cfg.params.get_int("clamp_len");
  RELPOS_CHECK_CONFIG(clamp_len >= -1, "position 'transformer_xl': clamp_len must be -1 (off) or >= 0, got {}",
                      clamp_len);
  RELPOS_CHECK_CONFIG(cfg.d_model % 2 == 0,
                      "position 'transformer_xl': d_model must be even for the [sin | cos] embedding, got {}",
                      cfg.d_model);
  TxlSizes s{cfg.d_model, cfg.n_heads, cfg.head_dim, clamp_len, cfg.init_std, cfg.dtype};
  using Part = TransformerXL::Part;
  return std::make_shared<TransformerXL>(cfg.shared_across_layers ? Part::Global : Part::Full, s, gen);
}
}  // namespace

PositionVariant transformer_xl_encoding() {
  return {.name = "transformer_xl",
          .description = "(q+u).k + (q+v).W_r R[qi-kj]: sinusoidal R, shared u/v, W_r per layer; causal (Dai 2019)",
          .params = {param::integer("clamp_len", "-1", "clamp distances to at most clamp_len (-1: off)")},
          .make = make_transformer_xl};
}

}  // namespace relpos::nn
