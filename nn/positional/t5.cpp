// nn/positional/t5.cpp — T5 relative position bias (Raffel et al. 2020; HF transformers
// T5Attention._relative_position_bucket / compute_bias).
//   rel = kj - qi (key minus query, T5's sign)
//   bidirectional (encoder): n = num_buckets / 2, bucket += n if rel > 0, r = |rel|
//   causal (decoder):        n = num_buckets,     r = max(-rel, 0)  (future keys -> bucket 0)
//   bucket += r                                        if r < n/2 (exact)
//          += min(n/2 + int(log(r/(n/2)) / log(max_distance/(n/2)) * (n - n/2)), n - 1)
// The large branch is computed in float32 as in the reference. bias[h] = table[bucket, h],
// table: [num_buckets, H]. T5 does not scale q.k (scale=false by default).
// Parameters: num_buckets (32), max_distance (128), scale (false).
#include <cmath>

#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/init.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"
#include "nn/positional/t5_bucket.h"

namespace relpos::nn {

int64_t t5_bucket(int64_t rel, bool bidirectional, int64_t num_buckets, int64_t max_distance) {
  int64_t ret = 0, n = num_buckets, r = 0;
  if (bidirectional) {
    n /= 2;
    if (rel > 0) ret += n;
    r = rel < 0 ? -rel : rel;
  } else {
    r = rel < 0 ? -rel : 0;
  }
  const int64_t max_exact = n / 2;
  if (r < max_exact) return ret + r;  // never evaluates log(0)
  float v = std::log(float(r) / float(max_exact)) / float(std::log(double(max_distance) / double(max_exact))) *
            float(n - max_exact);
  int64_t large = max_exact + int64_t(v);
  return ret + std::min(large, n - 1);
}

namespace {
class T5Bias : public PositionEncoding {
 public:
  T5Bias(int64_t num_buckets, int64_t max_distance, bool scale, int64_t heads, double std, Generator& gen, DType dt)
      : num_buckets_(num_buckets), max_distance_(max_distance), scale_(scale) {
    table_ = register_parameter("table", init::normal({num_buckets, heads}, std, gen, dt), group::kPosition);
  }
  std::string type() const override { return "t5"; }
  double score_scale(int64_t head_dim) const override { return scale_ ? 1.0 / std::sqrt(double(head_dim)) : 1.0; }

  Variable toeplitz_bias(const AttnGeometry& g) const override {
    Tensor buckets = geometry_cached("t5.buckets", g, [&] {  // int64 [Lq+Lk-1]
      std::vector<int64_t> d = toeplitz_distances(g).to_vector<int64_t>();
      for (auto& x : d) x = t5_bucket(x, !g.causal, num_buckets_, max_distance_);
      return Tensor::from_vector(d, {int64_t(d.size())});
    });
    return transpose(embedding(table_, buckets), 0, 1);  // [Lq+Lk-1, H] -> [H, Lq+Lk-1]
  }

  Tensor bias_index(const AttnGeometry& g) const override {
    std::vector<int64_t> idx(size_t(g.Lq * g.Lk));
    for (int64_t i = 0; i < g.Lq; ++i)
      for (int64_t j = 0; j < g.Lk; ++j)
        idx[size_t(i * g.Lk + j)] =
            t5_bucket((g.k_offset + j) - (g.q_offset + i), !g.causal, num_buckets_, max_distance_);
    return Tensor::from_vector(idx, {g.Lq, g.Lk});
  }

 private:
  int64_t num_buckets_, max_distance_;
  bool scale_;
  Variable table_;
};
}  // namespace

namespace {
PositionEncodingPtr make_t5(const PositionConfig& cfg, Generator& gen) {
  int64_t nb = cfg.params.get_int("num_buckets"), md = cfg.params.get_int("max_distance");
  RELPOS_CHECK_CONFIG(nb >= 4 && nb % 2 == 0, "position 't5': num_buckets must be an even number >= 4, got {}", nb);
  RELPOS_CHECK_CONFIG(md > nb / 2, "position 't5': max_distance ({}) must exceed num_buckets/2 ({})", md, nb / 2);
  return std::make_shared<T5Bias>(nb, md, cfg.params.get_bool("scale"), cfg.n_heads, cfg.init_std, gen, cfg.dtype);
}
}  // namespace

PositionVariant t5_encoding() {
  return {
      .name = "t5",
      .description = "T5 bucketed relative bias, table [num_buckets, H] (Raffel 2020)",
      .params = {param::integer("num_buckets", "32", "rows of the bias table [num_buckets, H] (even, >= 4)").rows(),
                 param::integer("max_distance", "128", "distance where the log-spaced buckets end (> num_buckets/2)"),
                 param::flag("scale", "false", "multiply q.k by 1/sqrt(head_dim) (T5 does not)")},
      .make = make_t5,
      .fused_attention = true,
      .facts = {.distance_indexed = true}};
}

}  // namespace relpos::nn
