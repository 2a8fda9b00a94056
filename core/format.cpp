#include <fmt/format.h>

#include <algorithm>

#include "core/tensor.h"

namespace relpos {

// Recursively print nested brackets, eliding the middle of long dims with "...".
static void format_rec(const Tensor& t, const std::vector<double>& v, int64_t dim, int64_t base,
                       int max_per_dim, std::string& out) {
  if (t.dim() == 0) {
    out += fmt::format("{:.6g}", v[0]);
    return;
  }
  int64_t n = t.size(dim);
  int64_t stride = 1;
  for (int64_t d = dim + 1; d < t.dim(); ++d) stride *= t.size(d);
  out += "[";
  for (int64_t i = 0; i < n; ++i) {
    if (n > max_per_dim && i == max_per_dim / 2) {
      out += "..., ";
      i = n - max_per_dim / 2;
    }
    if (dim + 1 == t.dim())
      out += t.dtype() == DType::I64 ? fmt::format("{}", int64_t(v[base + i])) : fmt::format("{:.6g}", v[base + i]);
    else
      format_rec(t, v, dim + 1, base + i * stride, max_per_dim, out);
    if (i + 1 < n) out += ", ";
  }
  out += "]";
}

std::string Tensor::str(int max_per_dim) const {
  if (!defined()) return "tensor(undefined)";
  // Eliding keeps max_per_dim / 2 elements at each end; below 2 that would be none and
  // format_rec would index one past the last element.
  max_per_dim = std::max(max_per_dim, 2);
  std::vector<double> v = to_vector<double>();
  std::string body;
  format_rec(*this, v, 0, 0, max_per_dim, body);
  return fmt::format("tensor({}, shape={}, dtype={}, device={})", body, shape_str(shape_),
                     dtype_name(dtype_), device_name(device()));
}

}  // namespace relpos
