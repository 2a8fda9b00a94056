#include "core/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace relpos {

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

bool checked_mul(int64_t a, int64_t b, int64_t& out) {
  if (a < 0 || b < 0) return false;
  return !__builtin_mul_overflow(a, b, &out);
}

bool checked_add(int64_t a, int64_t b, int64_t& out) {
  if (a < 0 || b < 0) return false;
  return !__builtin_add_overflow(a, b, &out);
}

bool checked_product(std::initializer_list<int64_t> factors, int64_t& out) {
  int64_t acc = 1;
  for (int64_t f : factors)
    if (!checked_mul(acc, f, acc)) return false;
  out = acc;
  return true;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  RELPOS_CHECK(dim >= lo && dim <= hi, "{}: dim {} out of range for a tensor with {} dims", op, dim,
               ndim);
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

int64_t wrap_existing_dim(int64_t dim, int64_t ndim, const char* op) {
  RELPOS_CHECK(ndim > 0, "{}: dim {} out of range for a 0-d tensor (it has no dims)", op, dim);
  return wrap_dim(dim, ndim, op);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    RELPOS_CHECK(da == db || da == 1 || db == 1,
                 "{}: shapes {} and {} cannot be broadcast together (dim {}: {} vs {})", op,
                 shape_str(a), shape_str(b), i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace relpos
