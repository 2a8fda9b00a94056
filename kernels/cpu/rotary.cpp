// kernels/cpu/rotary.cpp — rotary position encoding as one pass (kernels/ops.h):
//   row (n, m) of x [N, L, dh]: (a, b) -> (a c - b s, a s + b c) for each pair p < half,
//   c = cs[0, m, p], s = cs[1, m, p] (s negated for the inverse), channels >= 2 half copied.
// Pairs are (p, p + half) (half style) or (2p, 2p + 1) (interleaved). Rows are independent,
// so any thread count gives the same bits.
// x is read in place when its rows are contiguous (last stride 1), whatever the strides of the
// other dims: the heads of a projection, [B, H, L, dh] viewed from [B, L, H, dh], are rotated
// without a copy, and the output is laid out like x (dense) so that the fused attention and the
// backward's gradients, in the same layout, read it in place too. (A contiguous() copy of q and
// k and of their gradients was ~6% of a tiny RoPE step.)
#include <algorithm>
#include <numeric>
#include <vector>

#include "kernels/backend.h"

namespace relpos::k::cpu {

namespace {

// A new tensor of x's shape, its dimensions in x's memory order when x is dense (a permutation
// of a contiguous tensor), else contiguous.
Tensor empty_like_layout(const Tensor& x) {
  const int64_t n = x.dim();
  if (x.is_contiguous() || n < 2) return Tensor::empty(x.shape(), x.dtype());
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return x.strides()[size_t(a)] > x.strides()[size_t(b)]; });
  int64_t expect = 1;  // dense: each stride (innermost first) is the product of the sizes inside it
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t d = order[size_t(i)];
    if (x.size(d) != 1 && x.strides()[size_t(d)] != expect) return Tensor::empty(x.shape(), x.dtype());
    expect *= x.size(d);
  }
  Shape stored;
  std::vector<int64_t> back(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    stored.push_back(x.size(order[size_t(i)]));
    back[size_t(order[size_t(i)])] = i;
  }
  return Tensor::empty(stored, x.dtype()).permute(back);
}

// The element offset of matrix n (n over every dim but the last two, row-major) of t.
int64_t matrix_offset(const Tensor& t, int64_t n) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 3; d >= 0; --d) {
    const int64_t size = t.size(d);
    off += (n % size) * t.strides()[size_t(d)];
    n /= size;
  }
  return off;
}

}  // namespace

Tensor rotary(const Tensor& x_in, const Tensor& cs_in, bool interleaved, bool inverse) {
  const int64_t L = x_in.size(-2), dh = x_in.size(-1);
  const Tensor x = x_in.strides().back() == 1 || dh <= 1 ? x_in : x_in.contiguous(), cs = cs_in.contiguous();
  Tensor out = empty_like_layout(x);
  const int64_t half = cs.size(2), matrices = L == 0 ? 0 : x.numel() / (L * std::max<int64_t>(dh, 1));
  visit_float(x.dtype(), "rotary", [&]<typename T>() {
    const T* px = x.data<T>();
    const T* pc = cs.data<T>();
    T* po = out.data<T>();
    const T sign = inverse ? T(-1) : T(1);
    const int64_t x_ld = x.strides()[size_t(x.dim() - 2)], out_ld = out.strides()[size_t(out.dim() - 2)];
    const auto rotate_row = [&](const T* xr, T* yr, int64_t m) {
      const T* c = pc + m * half;
      const T* s = pc + (L + m) * half;
      if (interleaved) {
        for (int64_t p = 0; p < half; ++p) {
          const T a = xr[2 * p], b = xr[2 * p + 1], sp = sign * s[p];
          yr[2 * p] = a * c[p] - b * sp;
          yr[2 * p + 1] = a * sp + b * c[p];
        }
      } else {
#pragma omp simd
        for (int64_t p = 0; p < half; ++p) {
          const T a = xr[p], b = xr[p + half], sp = sign * s[p];
          yr[p] = a * c[p] - b * sp;
          yr[p + half] = a * sp + b * c[p];
        }
      }
      for (int64_t e = 2 * half; e < dh; ++e) yr[e] = xr[e];
    };
    // The heads of a projection ([B, H, L, dh] viewed from [B, L, H, dh]; out in the same layout):
    // rows in memory order, position by position with the heads inside, so that both tensors are
    // read and written as whole streams (matrix by matrix, each row was a 128-byte run H dh apart).
    // (out, from empty_like_layout, then has x's strides.)
    if (x.dim() == 4 && x.strides()[1] == dh && x_ld == x.size(1) * dh && x.strides()[0] == L * x_ld &&
        out.strides() == x.strides()) {
      const int64_t B = x.size(0), H = x.size(1);
#pragma omp parallel for schedule(static) if (B * L * H * dh >= 32768)
      for (int64_t bm = 0; bm < B * L; ++bm) {
        const int64_t m = bm % L;
        const T* xr = px + bm * x_ld;
        T* yr = po + bm * x_ld;
        for (int64_t h = 0; h < H; ++h) rotate_row(xr + h * dh, yr + h * dh, m);
      }
      return;
    }
#pragma omp parallel for schedule(static) if (matrices * L * dh >= 32768)
    for (int64_t n = 0; n < matrices; ++n) {  // matrix n: [L, dh] at one offset, its rows ld apart
      const T* xn = px + matrix_offset(x, n);
      T* yn = po + matrix_offset(out, n);
      for (int64_t m = 0; m < L; ++m) rotate_row(xn + m * x_ld, yn + m * out_ld, m);
    }
  });
  return out;
}

}  // namespace relpos::k::cpu
