// tests/helpers.h — small shared helpers for the test suite.
#pragma once
#include <catch2/catch.hpp>
#include <cctype>
#include <array>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/tensor.h"

namespace relpos::test {

// The library's layers, bottom to top (each folder's code includes only the folders before it:
// tests/core/test_layering.cpp); the structure tests scan these.
inline constexpr std::array<const char*, 7> kLayers = {"core", "kernels", "autograd", "nn",
                                                       "trainers", "experiments", "cli"};

// An empty directory <temp>/<name> (whatever was there before is removed), for a test's files.
inline std::string scratch_dir(const std::string& name) {
  const std::filesystem::path d = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

// A float64 leaf with non-uniform values in [lo, hi), seeded.
inline Variable rand_var(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0,
                         bool requires_grad = true) {
  Generator g(seed);
  return Variable(Tensor::rand(shape, g, DType::F64, lo, hi), requires_grad);
}

// REQUIRE a gradcheck to pass, printing the worst element either way.
inline void require_gradcheck(const std::string& op, const GradcheckFn& fn,
                              const std::vector<Variable>& inputs, GradcheckOptions opt = {}) {
  GradcheckReport r = gradcheck(op, fn, inputs, opt);
  INFO(r.str());
  REQUIRE(r.elements > 0);
  REQUIRE(r.ok);
}

// Element-wise |a - b| <= atol + rtol |b|.
inline bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-6, double atol = 1e-9) {
  if (a.shape() != b.shape()) return false;
  auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  for (size_t i = 0; i < va.size(); ++i)
    if (!(std::abs(va[i] - vb[i]) <= atol + rtol * std::abs(vb[i]))) return false;
  return true;
}

// An error text with every device named by describe() ("... on cpu", "... on cuda")
// replaced by "on <device>": the CPU and CUDA backends raise the same error naming their own
// device, so their texts compare equal only after this.
inline std::string without_device_names(std::string s) {
  for (std::string_view dev : {device_name(Device::CPU), device_name(Device::CUDA)}) {
    const std::string from = "on " + std::string(dev);
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at)) {
      const size_t end = at + from.size();
      auto word_char = [&](size_t i) { return std::isalnum(static_cast<unsigned char>(s[i])) != 0; };
      const bool whole = (at == 0 || !word_char(at - 1)) && (end == s.size() || !word_char(end));
      if (whole) s.replace(at, from.size(), "on <device>");
      at += whole ? std::string_view("on <device>").size() : from.size();
    }
  }
  return s;
}

}  // namespace relpos::test
