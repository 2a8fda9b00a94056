// tests/helpers.h — small shared helpers for the test suite.
#pragma once
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "relpos/autograd/gradcheck.h"
#include "relpos/autograd/ops.h"
#include "relpos/core/tensor.h"

namespace relpos::test {

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

}  // namespace relpos::test
