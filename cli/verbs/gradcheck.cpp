// relpos gradcheck [--type NAME|all] [--param k=v ...]    float64 gradcheck of attention + encoding
// relpos gradcheck --type NAME --entry [PARAM] [--index i,j]
//                                                  analytic vs numeric for one parameter entry
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "cli/command.h"
#include "experiments/inspect.h"
#include "experiments/inspect_run.h"

namespace relpos::cli {
namespace {

struct Args {
  std::string type = "all", entry;
  std::vector<std::string> params;
  std::vector<int64_t> index;
  CLI::Option* entry_opt = nullptr;
};

int check_all(const Args& a) {
  bool ok = true;
  const auto cases = inspect::attention_gradchecks(a.type, parse_params(a.params));
  for (const auto& c : cases) {
    ok = ok && c.report.ok;
    fmt::print("{:<6} {:<55} worst |analytic - numeric| {:.2e} (score {:.2e}, {} elements)\n",
               c.report.ok ? "ok" : "FAIL", c.label, c.report.abs_err, c.report.score, c.report.elements);
    if (!c.report.ok) fmt::print("       {}\n", c.report.str());
  }
  const auto passed = std::count_if(cases.begin(), cases.end(), [](auto& c) { return c.report.ok; });
  fmt::print("{} passed, {} failed\n", passed, int64_t(cases.size()) - passed);
  return ok ? 0 : 1;
}

int check_entry(const Args& a) {
  if (a.type == "all") throw UsageError("gradcheck --entry needs one --type");
  const auto r = train::entry_gradcheck(a.type, parse_params(a.params), a.entry, a.index);
  const double err = std::abs(r.analytic - r.numeric);
  fmt::print(
      "{} attention layer (float64, causal, L 6), parameter {}[{}]\n  analytic {:+.10e}\n  numeric  "
      "{:+.10e}   (central difference, eps 1e-6)\n  |difference| {:.2e}\n",
      a.type, r.param, fmt::join(r.index, ","), r.analytic, r.numeric, err);
  return err <= 1e-6 + 1e-5 * std::abs(r.numeric) ? 0 : 1;
}

Action setup(CLI::App& cmd) {
  auto a = std::make_shared<Args>();
  cmd.add_option("--type", a->type, "position encoding or 'all'")->capture_default_str();
  cmd.add_option("--param", a->params, "encoding parameter key=value (repeatable, single --type only)");
  a->entry_opt = cmd.add_option("--entry", a->entry,
                                "print analytic vs numeric gradient of one entry of this parameter "
                                "(e.g. pos.table; empty: the first position table)")
                     ->expected(0, 1);
  cmd.add_option("--index", a->index, "the entry's index (comma separated), default all zeros")->delimiter(',');
  return [a](Context&) { return *a->entry_opt ? check_entry(*a) : check_all(*a); };
}

}  // namespace

Command gradcheck_command() {
  return {"gradcheck", "float64 gradcheck of an attention layer with each position encoding", setup};
}

}  // namespace relpos::cli
