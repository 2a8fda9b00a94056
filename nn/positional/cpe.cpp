// nn/positional/cpe.cpp — Conditional Positional Encoding (Chu et al. 2021, "Conditional
// Positional Encodings for Vision Transformers", CPVT; reference Meituan-AutoML/CPVT, PosCNN):
// the Positional Encoding Generator (PEG) is a depthwise k x k convolution over the token grid,
// zero padding, with a bias, added to the tokens after the first block:
//   x [B, H W, D] -> X [B, H, W, D] (row-major) ;  x' = x + reshape(DWConv_k(X))      after block 0
//   DWConv_k(X)[b, i, j, c] = bias[c] + sum_{u, v < k} w[c, u, v] X[b, i + u - p, j + v - p, c],  p = (k-1)/2
// (PyTorch: nn.Conv2d(D, D, k, 1, k // 2, groups=D) on X.permute(0, 3, 1, 2); k::depthwise_conv2d).
// The positions are generated from the local content: nothing is tied to the training grid, so
// the same weights serve an 8x8, 12x12 or 16x16 grid (the setting CPVT was made for); the zero
// padding lets the tokens at the border tell where they are.
// The grid comes from the batch's `row` and `col` position channels (data.position_channels,
// nn/positional/grid.h): each example's tokens are its whole grid in row-major order (padding
// after them is left unchanged). A batch without them is an error naming the channels.
// One instance per stack (is_absolute: acts once on the stack, never per attention layer);
// attention itself carries no position term. Encoder only (the convolution sees both sides).
// Init: PyTorch's Conv2d default, weight and bias U(-1/k, 1/k) (fan_in = k * k).
// Parameters: kernel (odd, default 3).
#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/init.h"
#include "nn/positional/grid.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

namespace {
class Cpe : public PositionEncoding {
 public:
  Cpe(int64_t d_model, int64_t kernel, Generator& gen, DType dt, GridChannels ch) : ch_(ch) {
    const double bound = 1.0 / double(kernel);
    weight_ = register_parameter("conv_weight", init::uniform({d_model, kernel, kernel}, bound, gen, dt), group::kPosition);
    bias_ = register_parameter("conv_bias", init::uniform({d_model}, bound, gen, dt), group::kPosition);
  }
  std::string type() const override { return "cpe"; }
  bool is_absolute() const override { return true; }

  Variable after_block(const Variable& x, int64_t block, const StackInput& in) const override {
    if (block != 0) return x;
    RELPOS_CHECK(ch_.present() && in.positions.defined(),
                 "position 'cpe' reads the token grid from the position channels 'row' and 'col': list them in "
                 "data.position_channels (e.g. [row, col]) and give a token file with those channels{}",
                 ch_.present() ? " (this batch carries no positions)" : "");
    RELPOS_CHECK(x.dim() == 3 && x.size(0) == in.positions.size(0) && x.size(1) == in.positions.size(1),
                 "position 'cpe': hidden states {} and positions {} differ in batch or length",
                 shape_str(x.shape()), shape_str(in.positions.shape()));
    const Grid g = batch_grid(in.positions, ch_, in.padding, "position 'cpe'");
    const int64_t B = x.size(0), L = x.size(1), D = x.size(2), n = g.tokens();
    const Variable cells = n == L ? x : narrow(x, 1, 0, n);
    const Variable pe = depthwise_conv2d(reshape(cells, {B, g.h, g.w, D}), weight_, bias_);
    const Variable out = cells + reshape(pe, {B, n, D});
    return n == L ? out : cat({out, narrow(x, 1, n, L - n)}, 1);
  }

 private:
  GridChannels ch_;
  Variable weight_, bias_;
};
}  // namespace

namespace {
PositionEncodingPtr make_cpe(const PositionConfig& cfg, Generator& gen) {
  const int64_t k = cfg.params.get_int("kernel");
  RELPOS_CHECK_CONFIG(k >= 1 && k % 2 == 1, "position 'cpe': kernel must be odd and >= 1 (a k x k convolution "
                      "centred on each token), got {}", k);
  // Built without channels (gradchecks, `relpos bias`), the grid is refused at the first forward;
  // with channels that lack row or col, here (config validation builds every encoding).
  if (!cfg.channels.empty()) (void)channel_column(cfg, "row"), (void)channel_column(cfg, "col");
  return std::make_shared<Cpe>(cfg.d_model, k, gen, cfg.dtype, find_grid_channels(cfg.channels));
}
}  // namespace

PositionVariant cpe_encoding() {
  return {.name = "cpe",
          .description = "conditional positions: depthwise k x k conv over the row/col token grid after block 0 "
                         "(PEG, Chu 2021)",
          .params = {param::integer("kernel", "3", "k of the depthwise k x k convolution (odd)").at_most(63)},
          .make = make_cpe,
          .causal_capable = false,
          .fused_attention = true,
          .facts = {.no_bias_note = "conditional encoding: a depthwise convolution over the token grid after the "
                                    "first block, no attention bias",
                    .position_channels = {"row", "col"}}};
}

}  // namespace relpos::nn
