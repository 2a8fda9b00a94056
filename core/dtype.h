// core/dtype.h — element types and devices, and the dtype switch used at kernel entry.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"

namespace relpos {

enum class DType : uint8_t { F32, F64, I64 };
inline constexpr size_t kDTypeCount = size_t(DType::I64) + 1;  // the members above; keep with them
enum class Device : uint8_t { CPU, CUDA };

constexpr size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 8; }
constexpr std::string_view dtype_name(DType t) {
  return t == DType::F32 ? "float32" : t == DType::F64 ? "float64" : "int64";
}
constexpr std::string_view device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }
constexpr bool is_floating(DType t) { return t != DType::I64; }

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<double>() { return DType::F64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::I64; }

// visit_float(dt, op, [&]<typename T>() { ... }) — instantiate the body for float/double.
template <typename F>
decltype(auto) visit_float(DType dt, std::string_view op, F&& f) {
  switch (dt) {
    case DType::F32: return f.template operator()<float>();
    case DType::F64: return f.template operator()<double>();
    default: break;
  }
  fail("{}: expected a floating dtype (float32 or float64), got {}", op, dtype_name(dt));
}

// visit_all(dt, [&]<typename T>() { ... }) — float, double and int64.
template <typename F>
decltype(auto) visit_all(DType dt, F&& f) {
  switch (dt) {
    case DType::F32: return f.template operator()<float>();
    case DType::F64: return f.template operator()<double>();
    case DType::I64: return f.template operator()<int64_t>();
  }
  fail("unknown dtype");
}

}  // namespace relpos
