// core/shape.h — shapes, strides and broadcasting rules (row-major, element strides).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace relpos {

using Shape = std::vector<int64_t>;

int64_t numel_of(const Shape& s);
// Checked size arithmetic for sizes that come from user input (configs, CLI flags, file
// headers): false when the exact result does not fit in int64 (or an operand is negative).
bool checked_mul(int64_t a, int64_t b, int64_t& out);
bool checked_add(int64_t a, int64_t b, int64_t& out);
// The product of `factors` (each >= 0), or false on overflow.
bool checked_product(std::initializer_list<int64_t> factors, int64_t& out);
Shape contiguous_strides(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3]"
// Wrap a possibly negative dim into [0, ndim); throws naming op and ndim when out of range.
// A 0-d tensor accepts dim 0 and -1 (the scalar convention of reductions and softmax).
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// wrap_dim for ops that index the dim itself (size, narrow, select, transpose, cat, gather,
// ...): a 0-d tensor has no dim to index, so every dim throws.
int64_t wrap_existing_dim(int64_t dim, int64_t ndim, const char* op);
// NumPy broadcasting; throws naming op and both shapes when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace relpos
