// core/format.h — fmt support: fmt::format("{}", tensor) prints values, shape, dtype, device.
#pragma once
#include <fmt/format.h>

#include "core/tensor.h"

template <>
struct fmt::formatter<relpos::Tensor> : fmt::formatter<std::string> {
  template <typename Ctx>
  auto format(const relpos::Tensor& t, Ctx& ctx) const {
    return fmt::formatter<std::string>::format(t.str(), ctx);
  }
};
