// nn/positional/learned.cpp — learned absolute position embeddings E: [max_len, D], added to
// the token embeddings: x[b, t] += E[offset + t]. No extrapolation: positions beyond
// max_len are an error. Gradient: dE[p] = sum over (b, t) at position p of dx (scatter-add).
// Grids (resolution transfer): with grid_h and grid_w set and data.position_channels listing
// `row` and `col`, rows 0 .. grid_h grid_w - 1 are the training grid's cells in row-major order
// (the same rows a plain run uses), and a batch on another H' x W' grid (nn/positional/grid.h)
// gets those rows resized to H' x W' by bicubic interpolation per channel (ViT / DeiT's
// position-embedding resize, F.interpolate(mode="bicubic", align_corners=False)), added to its
// first H' W' tokens (padding after them gets nothing).
// Parameters: max_len (default: the model's max_len), grid_h, grid_w (default 0: no grid).
#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/init.h"
#include "nn/positional/grid.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

namespace {
class Learned : public PositionEncoding {
 public:
  Learned(int64_t max_len, int64_t d_model, double std, Generator& gen, DType dtype, Grid grid, GridChannels ch)
      : max_len_(max_len), grid_(grid), ch_(ch) {
    table_ = register_parameter("table", init::normal({max_len, d_model}, std, gen, dtype), group::kPosition);
  }
  std::string type() const override { return "learned"; }
  bool is_absolute() const override { return true; }

  Variable embed(const Variable& x, int64_t offset) const override {  // x: [B, L, D]
    const int64_t L = x.size(1);
    RELPOS_CHECK(offset >= 0 && offset + L <= max_len_,
                 "position 'learned': positions {}..{} exceed the table's max_len {} (learned absolute "
                 "positions cannot extrapolate; raise max_len)",
                 offset, offset + L - 1, max_len_);
    return x + embedding(table_, cached("learned.positions", {L, offset}, [&] { return Tensor::arange(offset, offset + L); }));
  }

  Variable embed_input(const Variable& x, const StackInput& in) const override {
    if (grid_.tokens() == 0 || !ch_.present() || !in.positions.defined()) return embed(x, in.offset);
    const Grid b = batch_grid(in.positions, ch_, in.padding, "position 'learned'");
    if (b == grid_) return embed(x, in.offset);
    const int64_t L = x.size(1), D = x.size(2), n = b.tokens();
    const Variable pe = resize_grid_rows(narrow(table_, 0, 0, grid_.tokens()), grid_, b);  // [n, D]
    const Variable cells = (n == L ? x : narrow(x, 1, 0, n)) + reshape(pe, {1, n, D});
    return n == L ? cells : cat({cells, narrow(x, 1, n, L - n)}, 1);
  }

 private:
  int64_t max_len_;
  Grid grid_;
  GridChannels ch_;
  Variable table_;
};
}  // namespace

namespace {
PositionEncodingPtr make_learned(const PositionConfig& cfg, Generator& gen) {
  int64_t max_len = cfg.params.get_int("max_len", cfg.max_len);
  RELPOS_CHECK_CONFIG(max_len > 0, "position 'learned': max_len must be positive, got {}", max_len);
  const Grid grid{cfg.params.get_int("grid_h"), cfg.params.get_int("grid_w")};
  RELPOS_CHECK_CONFIG((grid.h == 0) == (grid.w == 0) && grid.h >= 0 && grid.w >= 0,
                      "position 'learned': grid_h ({}) and grid_w ({}) are both 0 (no grid) or both >= 1", grid.h,
                      grid.w);
  RELPOS_CHECK_CONFIG(grid.tokens() <= max_len,
                      "position 'learned': the {}x{} grid needs {} table rows, but max_len is {}", grid.h, grid.w,
                      grid.tokens(), max_len);
  return std::make_shared<Learned>(max_len, cfg.d_model, cfg.init_std, gen, cfg.dtype, grid,
                                   find_grid_channels(cfg.channels));
}
}  // namespace

PositionVariant learned_encoding() {
  return {.name = "learned",
          .description = "learned absolute position embeddings [max_len, D]",
          .params = {param::integer("max_len", Computed{"model.max_len"},
                                    "rows of the learned table [max_len, D]; longer inputs are an error")
                         .rows(),
                     param::integer("grid_h", "0",
                                    "rows of the training token grid (with grid_w and the row/col position channels: "
                                    "other grids get the table resized, bicubic); 0: no grid")
                         .at_most(int64_t(1) << 16),
                     param::integer("grid_w", "0", "columns of the training token grid (see grid_h); 0: no grid")
                         .at_most(int64_t(1) << 16)},
          .make = make_learned,
          .fused_attention = true,
          .facts = {.bounded_by_max_len = true}};
}

}  // namespace relpos::nn
