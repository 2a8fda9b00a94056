// autograd/gradcheck.h — compare analytic gradients with float64 central differences.
// For f: inputs -> output, draw a random upstream gradient u (seeded) and check
// d/dx sum(f(x) * u) element by element: analytic (one backward) vs
// (L(x + eps e_i) - L(x - eps e_i)) / (2 eps). Inputs must be float64; only inputs with
// requires_grad are checked; they may be non-contiguous views.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/variable.h"

namespace relpos {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-6;
  double rtol = 1e-5;
  uint64_t seed = 1234;
};

struct GradcheckReport {
  bool ok = true;
  std::string op;
  int input = -1;               // worst element: which input,
  std::vector<int64_t> index;   // where in it,
  double analytic = 0.0, numeric = 0.0;  // both values,
  double abs_err = 0.0;         // |analytic - numeric|
  double score = 0.0;           // abs_err / (atol + rtol |numeric|); > 1 fails
  int64_t elements = 0;         // elements checked
  std::string str() const;
};

using GradcheckFn = std::function<Variable(const std::vector<Variable>&)>;

GradcheckReport gradcheck(const std::string& op, const GradcheckFn& fn,
                          const std::vector<Variable>& inputs, const GradcheckOptions& opt = {});

}  // namespace relpos
