// nn/positional/grid.h — 2D token grids for the encodings that read a batch's `row` and `col`
// position channels (cpe; relative_2d and learned with grid parameters), and the bicubic
// resize that serves a grid other than the training one (resolution transfer, docs/model.md).
//
// A batch's grid: positions int64 [B, L, P] (the columns PositionConfig::channels names),
// padding [B, L] (1 = padding) or undefined. The non-padding tokens of every example come first
// and are its H x W grid in row-major order: token t sits at (row, col) = (t / W, t % W), with
// H - 1 and W - 1 the largest row and col; every example of a batch has the same H x W.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "core/tensor.h"

namespace relpos::nn {

struct Grid {
  int64_t h = 0, w = 0;
  int64_t tokens() const { return h * w; }
  bool operator==(const Grid&) const = default;
};

// The columns of `row` and `col` in names (PositionConfig::channels); -1 where absent.
struct GridChannels {
  int64_t row = -1, col = -1;
  bool present() const { return row >= 0 && col >= 0; }
};
GridChannels find_grid_channels(const std::vector<std::string>& names);

// The batch's grid. Errors name `who` (e.g. "position 'cpe'"), the batch row, the token and the
// channel: a coordinate below 0, a token not at its row-major place, an example whose token count
// is not H x W, padding before the last real token, two grid sizes in one batch.
Grid batch_grid(const Tensor& positions, const GridChannels& ch, const Tensor& padding, const std::string& who);

// [n_out, n_in]: 1D bicubic interpolation as PyTorch's F.interpolate(mode="bicubic",
// align_corners=False) computes it (cubic convolution, A = -0.75; source x = (i + 0.5) n_in /
// n_out - 0.5, not clamped; taps outside 0..n_in-1 read the border). n_out == n_in: identity.
Tensor bicubic_matrix(int64_t n_out, int64_t n_in, DType dtype);

// rows [h_in * w_in, C] (row-major grid cells) -> [h_out * w_out, C], each of the C columns
// resized as an h_in x w_in image by bicubic_matrix along both axes (a matmul with the constant
// kron(Mh, Mw), so gradients reach `rows`). Equal sizes return `rows` itself.
Variable resize_grid_rows(const Variable& rows, Grid in, Grid out);

}  // namespace relpos::nn
