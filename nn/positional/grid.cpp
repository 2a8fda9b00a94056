// nn/positional/grid.cpp — batch grids and the bicubic resize (grid.h).
#include "nn/positional/grid.h"

#include <cmath>

#include "autograd/ops.h"

namespace relpos::nn {

GridChannels find_grid_channels(const std::vector<std::string>& names) {
  GridChannels g;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == "row") g.row = int64_t(i);
    if (names[i] == "col") g.col = int64_t(i);
  }
  return g;
}

Grid batch_grid(const Tensor& positions, const GridChannels& ch, const Tensor& padding, const std::string& who) {
  RELPOS_CHECK(positions.defined() && positions.dtype() == DType::I64 && positions.dim() == 3 &&
                   positions.size(2) > std::max(ch.row, ch.col) && ch.present(),
               "{}: expected the batch's token positions int64 [B, L, P] with channels 'row' and 'col', got {}", who,
               positions.defined() ? describe(positions) : std::string("none"));
  const int64_t B = positions.size(0), L = positions.size(1), P = positions.size(2);
  RELPOS_CHECK(!padding.defined() || (padding.dim() == 2 && padding.size(0) == B && padding.size(1) == L),
               "{}: padding must be [B, L] = [{}, {}], got {}", who, B, L, describe(padding));
  const std::vector<int64_t> pos = positions.to(Device::CPU).contiguous().to_vector<int64_t>();
  std::vector<double> pad;
  if (padding.defined()) pad = padding.to(Device::CPU).to(DType::F64).contiguous().to_vector<double>();
  Grid first;
  for (int64_t b = 0; b < B; ++b) {
    int64_t n = 0;  // real tokens: a prefix
    while (n < L && (pad.empty() || pad[size_t(b * L + n)] == 0.0)) ++n;
    for (int64_t t = n; t < L; ++t)
      RELPOS_CHECK(pad[size_t(b * L + t)] != 0.0,
                   "{}: batch row {}: token {} is padding but token {} is not (a grid's tokens come first)", who, b, n,
                   t);
    Grid g;
    for (int64_t t = 0; t < n; ++t) {
      const int64_t r = pos[size_t((b * L + t) * P + ch.row)], c = pos[size_t((b * L + t) * P + ch.col)];
      RELPOS_CHECK(r >= 0 && c >= 0, "{}: batch row {}, token {}: channel '{}' is {}, below 0", who, b, t,
                   r < 0 ? "row" : "col", r < 0 ? r : c);
      g.h = std::max(g.h, r + 1);
      g.w = std::max(g.w, c + 1);
    }
    RELPOS_CHECK(n > 0 && g.tokens() == n,
                 "{}: batch row {} has {} tokens, but its channels 'row' and 'col' reach a {}x{} grid of {} (the "
                 "tokens of an example are its whole grid, row-major)",
                 who, b, n, g.h, g.w, g.tokens());
    for (int64_t t = 0; t < n; ++t) {
      const int64_t r = pos[size_t((b * L + t) * P + ch.row)], c = pos[size_t((b * L + t) * P + ch.col)];
      RELPOS_CHECK(r == t / g.w && c == t % g.w,
                   "{}: batch row {}, token {}: channel '{}' is {}, expected {} (a {}x{} grid in row-major order puts "
                   "token t at row t / {}, col t % {})",
                   who, b, t, r != t / g.w ? "row" : "col", r != t / g.w ? r : c, r != t / g.w ? t / g.w : t % g.w,
                   g.h, g.w, g.w, g.w);
    }
    if (b == 0) first = g;
    RELPOS_CHECK(g == first,
                 "{}: batch row 0 is a {}x{} grid and batch row {} a {}x{} grid: one batch holds one grid size", who,
                 first.h, first.w, b, g.h, g.w);
  }
  return first;
}

namespace {
constexpr double kCubicA = -0.75;  // PyTorch's upsample_bicubic2d
double cubic1(double x) { return ((kCubicA + 2) * x - (kCubicA + 3)) * x * x + 1; }        // |x| <= 1
double cubic2(double x) { return ((kCubicA * x - 5 * kCubicA) * x + 8 * kCubicA) * x - 4 * kCubicA; }  // 1 < |x| < 2
}  // namespace

Tensor bicubic_matrix(int64_t n_out, int64_t n_in, DType dtype) {
  RELPOS_CHECK(n_out >= 1 && n_in >= 1, "bicubic_matrix: sizes must be >= 1, got {} and {}", n_out, n_in);
  std::vector<double> m(size_t(n_out * n_in), 0.0);
  const double scale = double(n_in) / double(n_out);
  for (int64_t i = 0; i < n_out; ++i) {
    const double x = (double(i) + 0.5) * scale - 0.5;
    const double x0 = std::floor(x), t = x - x0;
    const double w[4] = {cubic2(t + 1), cubic1(t), cubic1(1 - t), cubic2(2 - t)};
    for (int k = 0; k < 4; ++k) {
      const int64_t src = std::clamp<int64_t>(int64_t(x0) - 1 + k, 0, n_in - 1);
      m[size_t(i * n_in + src)] += w[k];
    }
  }
  return Tensor::from_vector(m, {n_out, n_in}).to(dtype);
}

Variable resize_grid_rows(const Variable& rows, Grid in, Grid out) {
  RELPOS_CHECK(rows.dim() == 2 && rows.size(0) == in.tokens(),
               "resize_grid_rows: expected [{} x {} = {}, C] rows, got {}", in.h, in.w, in.tokens(),
               shape_str(rows.shape()));
  if (in == out) return rows;
  const Tensor mh = bicubic_matrix(out.h, in.h, DType::F64), mw = bicubic_matrix(out.w, in.w, DType::F64);
  const std::vector<double> a = mh.to_vector<double>(), c = mw.to_vector<double>();
  std::vector<double> k(size_t(out.tokens() * in.tokens()));
  for (int64_t i = 0; i < out.h; ++i)
    for (int64_t j = 0; j < out.w; ++j)
      for (int64_t u = 0; u < in.h; ++u)
        for (int64_t v = 0; v < in.w; ++v)
          k[size_t((i * out.w + j) * in.tokens() + u * in.w + v)] = a[size_t(i * in.h + u)] * c[size_t(j * in.w + v)];
  const Tensor kron = Tensor::from_vector(k, {out.tokens(), in.tokens()}).to(rows.dtype()).to(rows.device());
  return matmul(Variable(kron), rows);
}

}  // namespace relpos::nn
