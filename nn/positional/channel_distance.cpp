// nn/positional/channel_distance.cpp — distances from a position channel (model.position.distance:
// a channel such as `time`, the onset of each token in 16ths) for the distance-indexed encodings
// (PositionFacts::distance_indexed). The encoding's own Toeplitz hooks are evaluated once over
// the range of distances present, dmin .. dmax, through a geometry whose Toeplitz distances are
// exactly that range (one query at position 0, keys at dmin .. dmax), and every (b, i, j) looks
// its own distance up in the result: no encoding has a second, per-channel form of its math.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "autograd/ops.h"
#include "core/shape.h"
#include "nn/positional/position_encoding.h"

namespace relpos::nn {

namespace {
// The distances of a channel span at most this many values in one call (a bias table [R, H]).
constexpr int64_t kMaxChannelDistanceSpan = int64_t(1) << 22;
}  // namespace

Tensor channel_distances(const AttnGeometry& g, int64_t column) {
  const Tensor& pos = g.positions;
  RELPOS_CHECK(pos.defined() && pos.dim() == 3 && pos.dtype() == DType::I64,
               "position distance from channel column {}: the attention layer got no position channels (expected "
               "int64 [B, L, P], got {}); data.position_channels must list the channel",
               column, pos.defined() ? shape_str(pos.shape()) : std::string("none"));
  const int64_t B = pos.size(0), L = pos.size(1), P = pos.size(2);
  RELPOS_CHECK(column >= 0 && column < P, "position distance: channel column {} is outside the {} position channels",
               column, P);
  RELPOS_CHECK(g.q_offset >= 0 && g.k_offset >= 0 && g.q_offset + g.Lq <= L && g.k_offset + g.Lk <= L,
               "position distance from channel column {}: queries {}..{} and keys {}..{} are not all among the {} "
               "tokens of the position channels",
               column, g.q_offset, g.q_offset + g.Lq - 1, g.k_offset, g.k_offset + g.Lk - 1, L);
  const std::vector<int64_t> c = pos.to(Device::CPU).contiguous().to_vector<int64_t>();
  std::vector<int64_t> d(size_t(B * g.Lq * g.Lk));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < g.Lq; ++i) {
      const int64_t ti = c[size_t((b * L + g.q_offset + i) * P + column)];
      int64_t* row = d.data() + (b * g.Lq + i) * g.Lk;
      for (int64_t j = 0; j < g.Lk; ++j) row[j] = c[size_t((b * L + g.k_offset + j) * P + column)] - ti;
    }
  return Tensor::from_vector(d, {B, g.Lq, g.Lk});
}

ChannelDistanceTerms channel_distance_terms(const PositionEncoding& pos, const AttnGeometry& g) {
  const int64_t column = pos.distance_column();
  RELPOS_CHECK(column >= 0, "position '{}': channel_distance_terms without a distance channel", pos.type());
  const Tensor d = channel_distances(g, column);
  std::vector<int64_t> rel = d.to_vector<int64_t>();
  int64_t lo = 0, hi = 0;
  if (!rel.empty()) {
    const auto [mn, mx] = std::minmax_element(rel.begin(), rel.end());
    lo = *mn, hi = *mx;
  }
  RELPOS_CHECK(hi - lo < kMaxChannelDistanceSpan,
               "position '{}': the channel distances of one batch span {} .. {}, more than {} values", pos.type(), lo,
               hi, kMaxChannelDistanceSpan);
  for (auto& x : rel) x -= lo;  // the Toeplitz entry of each distance in the range geometry
  const AttnGeometry range{.Lq = 1, .Lk = hi - lo + 1, .q_offset = 0, .k_offset = lo, .causal = g.causal};
  const Shape shape = d.shape();
  ChannelDistanceTerms out;
  if (Variable tb = pos.toeplitz_bias(range); tb.defined()) {  // [H, R]
    out.bias.table = transpose(tb, 0, 1);                      // [R, H]
    out.bias.index = Tensor::from_vector(rel, shape);
  }
  if (PositionEncoding::Buckets b = pos.distance_rows(range); b.keys.defined()) {
    const std::vector<int64_t> bucket = b.bucket.to(Device::CPU).contiguous().to_vector<int64_t>();  // [R]
    std::vector<int64_t> rows(rel.size());
    for (size_t t = 0; t < rel.size(); ++t) rows[t] = bucket[size_t(rel[t])];
    out.keys = b.keys;
    out.values = b.values;
    out.rows = Tensor::from_vector(rows, shape);
  }
  return out;
}

}  // namespace relpos::nn
