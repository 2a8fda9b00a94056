// nn/positional/relative_2d.cpp — Swin 2D relative position bias (Liu et al. 2021, Swin
// Transformer v1; reference microsoft/Swin-Transformer models/swin_transformer.py,
// WindowAttention.__init__ / forward).
//   Tokens are the patches of a Wh x Ww grid in row-major order (meshgrid 'ij' + flatten):
//   token p sits at (h, w) = (p / Ww, p % Ww).
//   dh = h_q - h_k, dw = w_q - w_k                       (query minus key per axis, Swin's
//                                                          coords[:, :, None] - coords[:, None, :])
//   index[i, j] = (dh + Wh - 1) * (2 Ww - 1) + (dw + Ww - 1)      in [0, (2Wh-1)(2Ww-1))
//   bias[h, i, j] = table[index[i, j], h],  table: [(2Wh-1)(2Ww-1), H]
// S = q.k / sqrt(d) + alpha * bias (added after scaling, as Swin adds it to (q * d^-0.5) k^T),
// then masks and softmax. Window (2, 3): index row 0 is 7 6 5 2 1 0 (see the tests).
// Positions: token p of the grid is the absolute position q_offset + i (k_offset + j), so a
// query or key subset of the window is exact; every position must lie inside the grid.
// Optional: geometry.position_index (int64 [Lq, Lk] or [B, Lq, Lk]) replaces the computed
// index, e.g. for windows with their own patch layout; values must be table rows.
// Encoder only: Swin attends bidirectionally within a window; causal attention is rejected.
// Grids from the data (resolution transfer): when data.position_channels lists `row` and `col`
// (PositionConfig::channels), the grid of each batch is read from them (nn/positional/grid.h)
// instead of assumed. A batch on the training grid grid_h x grid_w is served as above; a batch on
// another H' x W' grid (the 8x8 digits upsampled to 12x12 at evaluation) gets the index of its
// own grid over a table resized from (2Wh-1) x (2Ww-1) to (2H'-1) x (2W'-1) offsets by bicubic
// interpolation, per head (Swin v1's resolution change, F.interpolate(mode="bicubic",
// align_corners=False); grid.h's resize_grid_rows). Padding after the grid reads as its last token.
// Init: normal(init_std) like every relpos table (Swin: zeros, then trunc_normal std .02).
// Parameters: grid_h, grid_w (required, >= 1).
#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/init.h"
#include "nn/positional/grid.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

namespace {
class Relative2D : public PositionEncoding {
 public:
  Relative2D(int64_t gh, int64_t gw, int64_t heads, double std, Generator& gen, DType dt, GridChannels ch)
      : gh_(gh), gw_(gw), ch_(ch) {
    table_ = register_parameter("table", init::normal({(2 * gh - 1) * (2 * gw - 1), heads}, std, gen, dt),
                                group::kPosition);
  }
  std::string type() const override { return "relative_2d"; }

  Tensor bias_index(const AttnGeometry& g) const override {  // [Lq, Lk]
    const int64_t n = gh_ * gw_;
    RELPOS_CHECK(g.q_offset >= 0 && g.k_offset >= 0 && g.q_offset + g.Lq <= n && g.k_offset + g.Lk <= n,
                 "position encoding 'relative_2d': the {}x{} grid holds {} tokens, but queries are at positions "
                 "{}..{} and keys at {}..{}",
                 gh_, gw_, n, g.q_offset, g.q_offset + g.Lq - 1, g.k_offset, g.k_offset + g.Lk - 1);
    return grid_index(gh_, gw_, g);
  }

  // The bias as a lookup: table [(2Wh-1)(2Ww-1), H] gathered at the index (the base
  // score_bias materialises it for the reference path). On a batch grid other than the
  // training grid: the resized table and that grid's index.
  IndexBias index_bias(const AttnGeometry& g) const override {
    if (ch_.present() && g.positions.defined() && !g.position_index.defined()) {
      RELPOS_CHECK(!g.causal, "position encoding 'relative_2d' is encoder-only; it cannot be used with causal attention");
      const Grid b = batch_grid(g.positions, ch_, g.key_padding, "position 'relative_2d'");
      // Tokens after the grid (padding: masked keys, query rows nothing reads) look up as its last token.
      const Variable table = b == Grid{gh_, gw_} ? table_
                                                 : resize_grid_rows(table_, {2 * gh_ - 1, 2 * gw_ - 1},
                                                                    {2 * b.h - 1, 2 * b.w - 1});
      return {table, cached("relative_2d.grid_index", {b.h, b.w, g.Lq, g.Lk, g.q_offset, g.k_offset},
                            [&] { return grid_index(b.h, b.w, g); })};
    }
    return {table_, lookup_index(g)};
  }

 private:
  // Table rows [Lq, Lk] on an h x w grid: (dh + h - 1) (2w - 1) + (dw + w - 1); a position past the
  // grid (padding) is read as the grid's last token.
  static Tensor grid_index(int64_t h, int64_t w, const AttnGeometry& g) {
    std::vector<int64_t> idx(size_t(g.Lq * g.Lk));
    for (int64_t i = 0; i < g.Lq; ++i)
      for (int64_t j = 0; j < g.Lk; ++j) {
        const int64_t p = std::min(g.q_offset + i, h * w - 1), r = std::min(g.k_offset + j, h * w - 1);
        const int64_t dh = p / w - r / w, dw = p % w - r % w;
        idx[size_t(i * g.Lk + j)] = (dh + h - 1) * (2 * w - 1) + (dw + w - 1);
      }
    return Tensor::from_vector(idx, {g.Lq, g.Lk});
  }
  // The index index_bias reads (and the default score_bias through it): [(B,) Lq, Lk] table rows.
  Tensor lookup_index(const AttnGeometry& g) const {
    RELPOS_CHECK(!g.causal,
                 "position encoding 'relative_2d' is encoder-only (Swin attends bidirectionally within a window); "
                 "it cannot be used with causal attention");
    return g.position_index.defined() ? checked_index(g)
                                      : geometry_cached("relative_2d.index", g, [&] { return bias_index(g); });
  }
  Tensor checked_index(const AttnGeometry& g) const {
    const Tensor& t = g.position_index;
    RELPOS_CHECK(t.dtype() == DType::I64 && (t.dim() == 2 || t.dim() == 3) && t.size(-2) == g.Lq &&
                     t.size(-1) == g.Lk,
                 "position encoding 'relative_2d': position_index must be int64 [Lq, Lk] = [{}, {}] or [B, {}, {}], "
                 "got {}",
                 g.Lq, g.Lk, g.Lq, g.Lk, describe(t));
    const int64_t rows = table_.size(0);
    // Range check of a per-batch index from the data pipeline (host data, before any transfer);
    // a cuda index was checked on the host before it was moved.
    if (t.device() == Device::CPU)
      for (int64_t v : t.to_vector<int64_t>())
      RELPOS_CHECK(v >= 0 && v < rows,
                   "position encoding 'relative_2d': position_index value {} is outside the table rows 0..{} of the "
                   "{}x{} grid",
                   v, rows - 1, gh_, gw_);
    return t;
  }
  int64_t gh_, gw_;
  GridChannels ch_;
  Variable table_;
};
}  // namespace

namespace {
PositionEncodingPtr make_relative_2d(const PositionConfig& cfg, Generator& gen) {
  RELPOS_CHECK_CONFIG(cfg.params.has("grid_h") && cfg.params.has("grid_w"),
                      "position 'relative_2d': parameters grid_h and grid_w (the Wh x Ww patch grid) are required, "
                      "e.g. --param grid_h=2 --param grid_w=3");
  const int64_t gh = cfg.params.get_int("grid_h", 0), gw = cfg.params.get_int("grid_w", 0);
  RELPOS_CHECK_CONFIG(gh >= 1 && gw >= 1, "position 'relative_2d': grid_h ({}) and grid_w ({}) must be >= 1", gh,
                      gw);
  return std::make_shared<Relative2D>(gh, gw, cfg.n_heads, cfg.init_std, gen, cfg.dtype,
                                      find_grid_channels(cfg.channels));
}
}  // namespace

PositionVariant relative_2d_encoding() {
  return {.name = "relative_2d",
          .description = "Swin 2D relative bias on a grid_h x grid_w patch grid, table [(2Wh-1)(2Ww-1), H] (Liu 2021)",
          .params = {param::integer("grid_h", Computed{"required"}, "patch grid height Wh").rows(),
                     param::integer("grid_w", Computed{"required"}, "patch grid width Ww").rows()},
          .make = make_relative_2d,
          .causal_capable = false,
          .fused_attention = true,
          .facts = {.grid_params = true, .index_bias = true, .gradcheck_params = {{"grid_h", "3"}, {"grid_w", "4"}}}};
}

}  // namespace relpos::nn
