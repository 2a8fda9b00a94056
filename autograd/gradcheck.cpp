#include "autograd/gradcheck.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "autograd/grad_mode.h"
#include "kernels/ops.h"

namespace relpos {

std::string GradcheckReport::str() const {
  if (elements == 0) return fmt::format("{}: nothing to check", op);
  return fmt::format(
      "{}: {} — worst element input {} at [{}]: analytic {:.10g}, numeric {:.10g}, |diff| {:.3g} "
      "(score {:.3g}, {} elements checked)",
      op, ok ? "ok" : "FAILED", input, fmt::join(index, ", "), analytic, numeric, abs_err, score,
      elements);
}

GradcheckReport gradcheck(const std::string& op, const GradcheckFn& fn,
                          const std::vector<Variable>& inputs, const GradcheckOptions& opt) {
  for (size_t i = 0; i < inputs.size(); ++i)
    RELPOS_CHECK(inputs[i].dtype() == DType::F64, "gradcheck {}: input {} is {}, expected float64",
                 op, i, describe(inputs[i].data()));
  GradcheckReport rep;
  rep.op = op;

  // Analytic: one backward with a random upstream gradient u.
  for (const Variable& v : inputs) v.zero_grad();
  Variable out = fn(inputs);
  Generator gen(opt.seed);
  Tensor u = Tensor::randn(out.shape(), gen, DType::F64);
  RELPOS_CHECK(out.requires_grad(), "gradcheck {}: output does not require grad", op);
  out.backward(u);

  auto loss = [&]() {
    NoGradGuard ng;
    Tensor y = fn(inputs).data();
    return k::sum(k::mul(y, u)).item();
  };

  bool all_ok = true;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Variable& v = inputs[i];
    if (!v.requires_grad()) continue;
    const Tensor& x = v.data();
    Tensor ga = v.grad().defined() ? v.grad() : Tensor::zeros(x.shape(), DType::F64);
    std::vector<int64_t> idx(size_t(x.dim()), 0);
    double* base = static_cast<double*>(x.storage()->data());
    for (int64_t e = 0; e < x.numel(); ++e) {
      int64_t off = x.offset();
      for (int64_t d = 0; d < x.dim(); ++d) off += idx[d] * x.strides()[d];
      const double orig = base[off];
      base[off] = orig + opt.eps;
      const double lp = loss();
      base[off] = orig - opt.eps;
      const double lm = loss();
      base[off] = orig;
      const double numeric = (lp - lm) / (2 * opt.eps);
      const double analytic = ga.at(idx);
      const double abs_err = std::abs(analytic - numeric);
      const double score = std::isfinite(analytic) ? abs_err / (opt.atol + opt.rtol * std::abs(numeric))
                                                   : INFINITY;
      ++rep.elements;
      if (!(score <= 1.0)) all_ok = false;
      if (rep.input < 0 || !(score < rep.score)) {
        rep.input = int(i);
        rep.index = idx;
        rep.analytic = analytic;
        rep.numeric = numeric;
        rep.abs_err = abs_err;
        rep.score = score;
      }
      for (int64_t d = x.dim() - 1; d >= 0; --d) {
        if (++idx[d] < x.size(d)) break;
        idx[d] = 0;
      }
    }
  }
  rep.ok = all_ok;
  return rep;
}

}  // namespace relpos
