// Parity of one attention layer against an independent PyTorch (float64) implementation:
// tests/fixtures/attention_<name>.json, written by tools/make_attention_fixtures.py (run it with
// /usr/bin/python3). Each fixture holds the input x, every parameter value under relpos' dotted
// name, a fixed upstream gradient, and PyTorch's output and gradients w.r.t. x and every
// parameter. The relpos layer is built with the same position parameters, the fixture's values
// are copied into its parameters, and forward + backward must agree element-wise to
// |relpos - torch| <= 1e-12 + 1e-10 |torch|.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "../helpers.h"
#include "attention_fixture.h"

using namespace relpos;
using nlohmann::json;

namespace {

constexpr double kRtol = 1e-10, kAtol = 1e-12;

const std::vector<std::string>& fixture_names() {
  static const std::vector<std::string> v = {"t5", "alibi", "rope", "rope_interleaved", "shaw"};
  return v;
}

std::string fixture_path(const std::string& name) {
  return std::string(RELPOS_SOURCE_DIR) + "/tests/fixtures/attention_" + name + ".json";
}

// {"shape": [...], "data": [...]} -> float64 tensor; `what` names it in errors.
Tensor to_tensor(const json& j, const std::string& what) {
  if (!j.is_object() || !j.contains("shape") || !j.contains("data"))
    FAIL("fixture entry '" << what << "' is not a {shape, data} tensor");
  Shape shape = j.at("shape").get<Shape>();
  std::vector<double> data = j.at("data").get<std::vector<double>>();
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (int64_t(data.size()) != n)
    FAIL("fixture entry '" << what << "': shape " << shape_str(shape) << " needs " << n << " values, has "
                           << data.size());
  return Tensor::from_vector(data, shape).to(DType::F64);
}

struct Diff {
  bool ok = true;
  double max_abs = 0;    // max |relpos - torch|
  double max_ratio = 0;  // max |relpos - torch| / (atol + rtol |torch|): <= 1 passes
  std::string worst;                // the element furthest outside (or closest to) the tolerance
};

std::string index_str(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  std::ostringstream os;
  os << "[";
  for (size_t d = 0; d < idx.size(); ++d) os << (d ? ", " : "") << idx[d];
  os << "]";
  return os.str();
}

// relpos `got` against torch `want`.
Diff compare(const Tensor& got, const Tensor& want) {
  Diff r;
  auto a = got.to_vector<double>(), b = want.to_vector<double>();
  double worst_excess = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < a.size(); ++i) {
    const double err = std::abs(a[i] - b[i]), tol = kAtol + kRtol * std::abs(b[i]);
    const bool bad = !(err <= tol);  // NaN counts as bad
    r.ok = r.ok && !bad;
    r.max_abs = std::max(r.max_abs, err);
    r.max_ratio = std::max(r.max_ratio, err / tol);
    const double excess = bad && std::isnan(err) ? std::numeric_limits<double>::infinity() : err - tol;
    if (excess > worst_excess) {
      worst_excess = excess;
      std::ostringstream os;
      os.precision(17);
      os << "worst element " << index_str(int64_t(i), want.shape()) << ": relpos " << a[i] << ", torch " << b[i]
         << ", |diff| " << err << " (tolerance " << tol << ")";
      r.worst = os.str();
    }
  }
  return r;
}

}  // namespace

TEST_CASE("attention matches an independent PyTorch reference (output and every gradient)", "[nn][parity]") {
  for (const std::string& name : fixture_names()) {
    DYNAMIC_SECTION("fixture " << name) {
      const std::string path = fixture_path(name);
      std::ifstream in(path);
      if (!in)
        FAIL("missing fixture " << path
                                << " — regenerate with: /usr/bin/python3 tools/make_attention_fixtures.py");
      json fx;
      try {
        fx = json::parse(in);
      } catch (const std::exception& e) {
        FAIL("fixture " << path << " is not valid JSON: " << e.what());
      }
      const std::string type = fx.at("type").get<std::string>();
      const auto params = fx.at("params").get<std::map<std::string, std::string>>();
      const bool causal = fx.at("causal").get<bool>();
      const int64_t H = fx.at("H").get<int64_t>(), D = fx.at("D").get<int64_t>();
      INFO("fixture " << name << " (" << type << (causal ? ", causal" : ", bidirectional") << ")");

      auto s = test::make_attention(type, params, H, D, /*bias_scale=*/false, /*seed=*/5, DType::F64);

      // Load every parameter by name; the two name sets must be identical.
      const json& fparams = fx.at("parameters");
      const json& fgrads = fx.at("grads");
      auto named = s.attn->named_parameters();
      std::set<std::string> relpos_names;
      for (auto& [pname, p] : named) {
        relpos_names.insert(pname);
        if (!fparams.contains(pname)) FAIL("relpos parameter '" << pname << "' is missing from fixture " << path);
        if (!fgrads.contains(pname)) FAIL("gradient of '" << pname << "' is missing from fixture " << path);
        Tensor t = to_tensor(fparams.at(pname), "parameters." + pname);
        if (t.shape() != p.shape())
          FAIL("parameter '" << pname << "': relpos shape " << shape_str(p.shape()) << ", fixture shape "
                             << shape_str(t.shape()));
        p.data().copy_(t);
        p.zero_grad();
      }
      for (auto it = fparams.begin(); it != fparams.end(); ++it)
        if (!relpos_names.count(it.key()))
          FAIL("fixture parameter '" << it.key() << "' does not exist in the relpos layer");

      Variable x(to_tensor(fx.at("x"), "x"), true);
      Tensor upstream = to_tensor(fx.at("upstream_grad"), "upstream_grad");
      Variable y = s.attn->forward({.xq = x, .xkv = x, .causal = causal});
      y.backward(upstream);

      // name -> (relpos, torch)
      std::vector<std::tuple<std::string, Tensor, Tensor>> checks;
      checks.emplace_back("output", y.data(), to_tensor(fx.at("output"), "output"));
      checks.emplace_back("grad x", x.grad(), to_tensor(fx.at("grad_x"), "grad_x"));
      for (auto& [pname, p] : named)
        checks.emplace_back("grad " + pname, p.grad(), to_tensor(fgrads.at(pname), "grads." + pname));

      double max_abs = 0, max_ratio = 0;
      for (auto& [what, got, want] : checks) {
        INFO(what);
        if (!got.defined()) FAIL(what << ": relpos produced no gradient");
        if (got.shape() != want.shape())
          FAIL(what << ": relpos shape " << shape_str(got.shape()) << ", torch shape " << shape_str(want.shape()));
        Diff d = compare(got, want);
        max_abs = std::max(max_abs, d.max_abs);
        max_ratio = std::max(max_ratio, d.max_ratio);
        INFO(d.worst);
        CHECK(d.ok);
      }
      // One line per fixture (visible with -s): the largest deviations seen.
      std::ostringstream os;
      os.precision(3);
      os << "attention parity " << name << ": max |diff| " << max_abs << ", max |diff| / tolerance " << max_ratio
         << " over " << checks.size() << " tensors";
      SUCCEED(os.str());
    }
  }
}
