// tests/autograd/test_torch_parity.cpp — end-to-end parity with PyTorch on a composite
// function, forward and backward:
//   x @ W1 -> layer_norm(g, b) -> gelu(erf) -> softmax(-1) -> @ W2 -> cross_entropy(-100)
// The reference (inputs, intermediate outputs, loss, gradients in float32 and float64) is
// tests/fixtures/parity_composite.json, written by tools/make_parity_fixture.py with torch.
// Each element must satisfy |relpos - torch| <= atol + rtol |torch| (rtol 1e-5, atol 1e-6).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "autograd/ops.h"
#include "core/tensor.h"

using namespace relpos;
using nlohmann::json;

namespace {

const char* const kFixturePath = RELPOS_SOURCE_DIR "/tests/fixtures/parity_composite.json";
constexpr double kRtol = 1e-5;
constexpr double kAtol = 1e-6;

struct RefTensor {
  Shape shape;
  std::vector<double> data;
};

struct ParityFixture {
  double eps = 0.0;
  int64_t ignore_index = 0;
  std::map<std::string, RefTensor> inputs;                                // x, W1, g, b, W2
  Shape target_shape;
  std::vector<int64_t> target;
  std::map<std::string, std::map<std::string, RefTensor>> outputs, grads;  // by "float32"/"float64"
};

const std::vector<std::string> kInputNames = {"x", "W1", "g", "b", "W2"};
const std::vector<std::string> kOutputNames = {"h", "layer_norm", "gelu", "softmax", "logits", "loss"};
const std::vector<std::string> kDTypeNames = {"float32", "float64"};

// Child `key` of object j (named `where` in errors), or throw naming the missing key.
const json& child(const json& j, const std::string& key, const std::string& where) {
  if (!j.is_object()) throw std::runtime_error("'" + where + "' is not a JSON object");
  auto it = j.find(key);
  if (it == j.end()) throw std::runtime_error("missing key '" + where + "." + key + "'");
  return *it;
}

Shape read_shape(const json& j, const std::string& where) {
  const json& s = child(j, "shape", where);
  if (!s.is_array()) throw std::runtime_error("'" + where + ".shape' is not an array");
  Shape shape;
  for (const json& d : s) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      throw std::runtime_error("'" + where + ".shape' holds a non-size entry " + d.dump());
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

const json& read_data(const json& j, const Shape& shape, const std::string& where) {
  const json& d = child(j, "data", where);
  if (!d.is_array()) throw std::runtime_error("'" + where + ".data' is not an array");
  if (int64_t(d.size()) != numel_of(shape))
    throw std::runtime_error("'" + where + "' has " + std::to_string(d.size()) +
                             " values for shape " + shape_str(shape));
  return d;
}

RefTensor read_tensor(const json& j, const std::string& where) {
  RefTensor t;
  t.shape = read_shape(j, where);
  for (const json& v : read_data(j, t.shape, where)) {
    if (!v.is_number()) throw std::runtime_error("'" + where + ".data' holds a non-number " + v.dump());
    t.data.push_back(v.get<double>());
  }
  return t;
}

// Load the fixture at `path`. Returns "" on success, otherwise a message saying what is wrong.
std::string load_fixture(const std::string& path, ParityFixture& fx) {
  const std::string regen = " (regenerate with: /usr/bin/python3 tools/make_parity_fixture.py)";
  std::ifstream in(path);
  if (!in) return "cannot open parity fixture " + path + regen;
  try {
    json j = json::parse(in);
    fx.eps = child(j, "eps", "fixture").get<double>();
    fx.ignore_index = child(j, "ignore_index", "fixture").get<int64_t>();
    const json& inputs = child(j, "inputs", "fixture");
    for (const std::string& n : kInputNames)
      fx.inputs[n] = read_tensor(child(inputs, n, "inputs"), "inputs." + n);
    const json& tg = child(j, "target", "fixture");
    fx.target_shape = read_shape(tg, "target");
    for (const json& v : read_data(tg, fx.target_shape, "target")) {
      if (!v.is_number_integer()) throw std::runtime_error("'target.data' holds a non-integer " + v.dump());
      fx.target.push_back(v.get<int64_t>());
    }
    for (const std::string& dt : kDTypeNames) {
      const json& d = child(j, dt, "fixture");
      const json& outs = child(d, "outputs", dt);
      for (const std::string& n : kOutputNames)
        fx.outputs[dt][n] = read_tensor(child(outs, n, dt + ".outputs"), dt + ".outputs." + n);
      const json& grads = child(d, "grads", dt);
      for (const std::string& n : kInputNames)
        fx.grads[dt][n] = read_tensor(child(grads, n, dt + ".grads"), dt + ".grads." + n);
    }
  } catch (const std::exception& e) {  // json::exception derives from std::exception
    return "bad parity fixture " + path + ": " + e.what() + regen;
  }
  return "";
}

struct Comparison {
  bool ok = true;
  double max_abs = 0.0;  // max |a - b|
  double max_rel = 0.0;  // max |a - b| / |b| over elements with |b| >= atol
  std::string message;   // the worst element (or the shape mismatch)
};

// Compare `actual` with the reference, element by element.
Comparison compare(const std::string& what, const Tensor& actual, const RefTensor& ref) {
  Comparison c;
  if (!actual.defined()) {
    c.ok = false;
    c.message = what + ": relpos tensor is undefined";
    return c;
  }
  if (actual.shape() != ref.shape) {
    c.ok = false;
    c.message = what + ": shape " + shape_str(actual.shape()) + " vs torch " + shape_str(ref.shape);
    return c;
  }
  std::vector<double> a = actual.to_vector<double>();
  double worst_score = -1.0;
  size_t worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double b = ref.data[i], err = std::abs(a[i] - b);
    const double bound = kAtol + kRtol * std::abs(b);
    const double score = std::isnan(err) ? INFINITY : err / bound;
    if (score > worst_score) worst_score = score, worst = i;
    if (!(err <= bound)) c.ok = false;
    c.max_abs = std::max(c.max_abs, err);
    if (std::abs(b) >= kAtol) c.max_rel = std::max(c.max_rel, err / std::abs(b));
  }
  char buf[512];
  if (a.empty()) {
    std::snprintf(buf, sizeof buf, "%s: empty", what.c_str());
  } else {
    const double b = ref.data[worst];
    std::snprintf(buf, sizeof buf,
                  "%s %s: worst element %zu: relpos %.9g vs torch %.9g (|diff| %.3g, bound %.3g = "
                  "%.0e + %.0e*|torch|); max abs err %.3g, max rel err %.3g",
                  what.c_str(), c.ok ? "ok" : "MISMATCH", worst, a[worst], b, std::abs(a[worst] - b),
                  kAtol + kRtol * std::abs(b), kAtol, kRtol, c.max_abs, c.max_rel);
  }
  c.message = buf;
  return c;
}

// Run the composite in `dtype` from the fixture's inputs and compare with its reference.
void check_parity(DType dtype, const std::string& dt_name) {
  ParityFixture fx;
  const std::string err = load_fixture(kFixturePath, fx);
  if (!err.empty()) FAIL(err);

  auto leaf = [&](const std::string& n) {
    const RefTensor& r = fx.inputs.at(n);
    // The fixture holds float32 values written exactly, so .to(F32) is exact.
    return Variable(Tensor::from_vector<double>(r.data, r.shape).to(dtype), true).set_name(n);
  };
  std::map<std::string, Variable> in;
  for (const std::string& n : kInputNames) in.emplace(n, leaf(n));
  Tensor target = Tensor::from_vector<int64_t>(fx.target, fx.target_shape);

  Variable h = matmul(in.at("x"), in.at("W1"));
  Variable ln = layer_norm(h, in.at("g"), in.at("b"), fx.eps);
  Variable a = gelu(ln, GeluApprox::Erf);
  Variable s = softmax(a, -1);
  Variable logits = matmul(s, in.at("W2"));
  Variable loss = cross_entropy(logits, target, fx.ignore_index);
  loss.backward();

  const std::map<std::string, Tensor> outs = {{"h", h.data()},       {"layer_norm", ln.data()},
                                              {"gelu", a.data()},    {"softmax", s.data()},
                                              {"logits", logits.data()}, {"loss", loss.data()}};
  double max_abs = 0.0, max_rel = 0.0;
  std::ostringstream summary;
  auto check = [&](const std::string& what, const Tensor& t, const RefTensor& ref) {
    Comparison c = compare(dt_name + " " + what, t, ref);
    max_abs = std::max(max_abs, c.max_abs);
    max_rel = std::max(max_rel, c.max_rel);
    summary << "  " << c.message << "\n";
    INFO(c.message);
    CHECK(c.ok);
  };
  for (const std::string& n : kOutputNames) check(n, outs.at(n), fx.outputs.at(dt_name).at(n));
  for (const std::string& n : kInputNames)
    check("grad " + n, in.at(n).grad(), fx.grads.at(dt_name).at(n));
  std::printf("torch parity (%s): max abs err %.3g, max rel err %.3g\n%s", dt_name.c_str(), max_abs,
              max_rel, summary.str().c_str());
}

}  // namespace

TEST_CASE("torch parity: composite matmul/layer_norm/gelu/softmax/cross_entropy in float32",
          "[autograd][parity]") {
  check_parity(DType::F32, "float32");
}

TEST_CASE("torch parity: composite matmul/layer_norm/gelu/softmax/cross_entropy in float64",
          "[autograd][parity]") {
  check_parity(DType::F64, "float64");
}

TEST_CASE("torch parity: a missing or corrupt fixture gives a clear error, not a crash",
          "[autograd][parity]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("relpos_parity_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto load_text = [&](const std::string& name, const std::string& text) {
    const std::string p = (dir / name).string();
    std::ofstream(p) << text;
    ParityFixture fx;
    return load_fixture(p, fx);
  };

  {
    ParityFixture fx;
    const std::string err = load_fixture((dir / "does_not_exist.json").string(), fx);
    INFO(err);
    CHECK(err.find("cannot open parity fixture") != std::string::npos);
    CHECK(err.find("does_not_exist.json") != std::string::npos);
  }
  {
    const std::string err = load_text("truncated.json", "{\"eps\": 1e-5, \"inputs\": {\"x\": [1, 2");
    INFO(err);
    CHECK(err.find("bad parity fixture") != std::string::npos);
    CHECK(err.find("parse") != std::string::npos);
  }
  {
    const std::string err = load_text("no_inputs.json", "{\"eps\": 1e-5, \"ignore_index\": -100}");
    INFO(err);
    CHECK(err.find("missing key 'fixture.inputs'") != std::string::npos);
  }
  {
    const std::string err = load_text("bad_size.json",
                                      "{\"eps\": 1e-5, \"ignore_index\": -100, \"inputs\": {\"x\": "
                                      "{\"shape\": [2, 2], \"data\": [1, 2, 3]}}}");
    INFO(err);
    CHECK(err.find("'inputs.x' has 3 values for shape [2, 2]") != std::string::npos);
  }
  {
    const std::string err = load_text("bad_type.json", "{\"eps\": \"small\", \"ignore_index\": -100}");
    INFO(err);
    CHECK(err.find("bad parity fixture") != std::string::npos);
  }

  fs::remove_all(dir);
}
