// tests/kernels/test_backend_ops.cpp — the backend test harness (ggml's test-backend-ops is
// the model). Every case of tests/support/backend_cases.h runs:
//   - on the CPU with strided inputs and with contiguous copies of them (same result),
//   - on the CPU in float32 and in float64 (same result to float32 precision),
//   - on every other available backend against the CPU reference (per-op tolerances; bit
//     for bit where the op promises it), where k::supports() says that backend has the op —
//     without a GPU these are skipped with the reason,
//   - with NaN/Inf inputs where marked (the NaN must reach the output),
//   - under guard mode (core/storage.h): canary bytes around every allocation, checked on
//     free, so an out-of-bounds write by any kernel fails the run,
//   - through autograd in float64 (gradcheck) where the case has an autograd form.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <set>

#include "../helpers.h"
#include "backend_cases.h"
#include "core/cuda_runtime.h"
#include "kernels/backend.h"

using namespace relpos;
using cases::OpCase;

namespace {

std::vector<Device> backends() {
  std::vector<Device> d{Device::CPU};
  if (cuda::available()) d.push_back(Device::CUDA);
  return d;
}

std::string dtype_str(DType t) { return std::string(dtype_name(t)); }

// Run case c on dev; outputs copied to the host.
std::vector<Tensor> run_case(const OpCase& c, DType dt, Device dev, bool contiguous = false, bool round32 = false) {
  std::vector<Tensor> in = cases::make_inputs(c, dt, dev, round32);
  if (contiguous)
    for (Tensor& t : in) t = t.contiguous();
  std::vector<Tensor> out = c.run(in, dev);
  for (Tensor& o : out) o = o.to(Device::CPU);
  return out;
}

// Compare got with ref elementwise: NaN matches NaN, an infinity matches the same infinity,
// else |got - ref| <= atol + rtol |ref| (exact: ==). Empty string when they agree.
std::string compare(const Tensor& got, const Tensor& ref, double rtol, double atol, bool exact) {
  if (got.shape() != ref.shape()) return "shape " + shape_str(got.shape()) + " vs " + shape_str(ref.shape());
  std::vector<double> g = got.to_vector<double>(), r = ref.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    const bool gn = std::isnan(g[i]), rn = std::isnan(r[i]);
    bool ok;
    if (gn || rn) ok = gn && rn;
    else if (std::isinf(r[i]) || std::isinf(g[i])) ok = g[i] == r[i];
    else if (exact) ok = g[i] == r[i];
    else ok = std::abs(g[i] - r[i]) <= atol + rtol * std::abs(r[i]);
    if (!ok)
      return fmt::format("element {} of {}: got {:.17g}, expected {:.17g} (rtol {}, atol {}{})", i, g.size(), g[i],
                         r[i], rtol, atol, exact ? ", exact" : "");
  }
  return "";
}

std::string compare_all(const std::vector<Tensor>& got, const std::vector<Tensor>& ref, double rtol, double atol,
                        bool exact) {
  if (got.size() != ref.size()) return fmt::format("{} outputs vs {}", got.size(), ref.size());
  for (size_t i = 0; i < got.size(); ++i) {
    std::string m = compare(got[i], ref[i], rtol, atol, exact);
    if (!m.empty()) return fmt::format("output {}: {}", i, m);
  }
  return "";
}

double rtol(const OpCase& c, DType t) { return t == DType::F64 ? c.rtol64 : c.rtol32; }
double atol(const OpCase& c, DType t) { return t == DType::F64 ? c.atol64 : c.atol32; }

// Run body; an exception is a failure of the case, reported with its name.
template <typename F>
void guarded_check(const std::string& what, F&& body) {
  std::string msg;
  try {
    msg = body();
  } catch (const std::exception& e) {
    msg = std::string("threw: ") + e.what();
  }
  INFO(what);
  CHECK(msg == "");
}

struct GuardScope {
  GuardScope() {
    guard::reset_stats();
    guard::set_enabled(true);
  }
  ~GuardScope() { guard::set_enabled(false); }
};

}  // namespace

TEST_CASE("backend ops: the case table is well formed", "[backend]") {
  const auto cs = cases::backend_cases();
  std::set<std::string> names;
  std::set<std::string> ops;
  size_t runs = 0;
  for (const OpCase& c : cs) {
    INFO(c.name);
    CHECK(names.insert(c.name).second);  // unique names
    CHECK(c.run);
    ops.insert(c.op);
    runs += c.dtypes.size();
  }
  // Every op of the table (kernels/op_table.inc, k::op_names) has cases, and every case names
  // an op of the table.
  for (std::string_view op : k::op_names) {
    INFO(op);
    CHECK(ops.count(std::string(op)) == 1);
  }
  for (const std::string& op : ops) {
    INFO(op);
    CHECK(std::count(k::op_names.begin(), k::op_names.end(), op) == 1);
  }
  CHECK(cs.size() >= 300);
  WARN(fmt::format("backend harness: {} cases, {} case x dtype runs per backend, {} ops", cs.size(), runs, ops.size()));
}

TEST_CASE("backend ops: cpu, strided inputs give the contiguous inputs' result", "[backend]") {
  int checked = 0;
  for (const OpCase& c : cases::backend_cases()) {
    if (!cases::has_views(c)) continue;
    for (DType t : c.dtypes) {
      guarded_check(c.name + " " + dtype_str(t), [&] {
        auto a = run_case(c, t, Device::CPU, false), b = run_case(c, t, Device::CPU, true);
        return compare_all(a, b, rtol(c, t), atol(c, t), c.exact);
      });
      ++checked;
    }
  }
  CHECK(checked > 50);
}

TEST_CASE("backend ops: cpu, float32 agrees with float64", "[backend]") {
  int checked = 0;
  for (const OpCase& c : cases::backend_cases()) {
    const bool both = std::count(c.dtypes.begin(), c.dtypes.end(), DType::F32) &&
                      std::count(c.dtypes.begin(), c.dtypes.end(), DType::F64);
    if (!both) continue;
    guarded_check(c.name, [&] {
      auto f32 = run_case(c, DType::F32, Device::CPU, false, true);
      auto f64 = run_case(c, DType::F64, Device::CPU, false, true);
      return compare_all(f32, f64, c.rtol32, c.atol32, false);
    });
    ++checked;
  }
  CHECK(checked > 100);
}

TEST_CASE("backend ops: every backend agrees with the cpu", "[backend]") {
  if (!cuda::available()) {
    WARN(std::string("no CUDA device (") + (cuda::built_with_cuda() ? "built with CUDA" : "built without CUDA") +
         "): CUDA backend cases skipped; they run in relpos_cuda_tests on a GPU machine");
    SUCCEED("no CUDA device");
    return;
  }
  for (Device dev : backends()) {
    if (dev == Device::CPU) continue;
    for (const OpCase& c : cases::backend_cases())
      for (DType t : c.dtypes) {
        if (!cases::supported(c, t, dev)) continue;  // refused there: checked by the supports() case below
        guarded_check(c.name + " " + dtype_str(t) + " on " + std::string(device_name(dev)), [&] {
          auto got = run_case(c, t, dev), ref = run_case(c, t, Device::CPU);
          return compare_all(got, ref, rtol(c, t), atol(c, t), c.exact);
        });
      }
  }
}

// k::supports() against the table and the backends: every case runs on the CPU in the dtypes
// it lists, so the CPU must claim them; a dtype the CPU does not claim must be refused. On a
// CUDA device the same holds for its backend (a claimed case runs in the case above); without
// one, the ops CUDA does not claim are still refused by its entry points (kernels/backend.h).
TEST_CASE("backend ops: supports() agrees with what each backend does", "[backend]") {
  const auto cs = cases::backend_cases();
  for (Device dev : backends())
    for (size_t i = 0; i < k::num_ops; ++i) {
      const k::Op op = k::Op(i);
      const auto first = std::find_if(cs.begin(), cs.end(), [&](const OpCase& c) {
        return cases::op_of(c) == op && std::count(c.dtypes.begin(), c.dtypes.end(), DType::F32);
      });
      REQUIRE(first != cs.end());
      for (DType t : {DType::F32, DType::F64, DType::I64}) {
        INFO(fmt::format("{} {} on {}", k::op_name(op), dtype_str(t), device_name(dev)));
        bool listed = false;
        for (const OpCase& c : cs) listed |= cases::op_of(c) == op && std::count(c.dtypes.begin(), c.dtypes.end(), t);
        if (dev == Device::CPU && listed) CHECK(k::supports(dev, op, t));
        if (k::supports(dev, op, t)) continue;
        if (op == k::Op::dropout_mask) {  // no tensor input: the dtype is an argument
          Generator g(1);
          CHECK_THROWS(k::dropout_mask({3}, 0.5, g, t, dev));
        } else {
          CHECK_THROWS(run_case(*first, t, dev));
        }
      }
    }
  Tensor q = Tensor::zeros({1, 1, 2, 2});
  if (!k::supports(Device::CUDA, k::Op::attention, DType::F32))
    CHECK_THROWS(k::cuda::attention(q, q, q, Tensor(), Tensor(), k::AttentionArgs(), {}, {}));
  if (!k::supports(Device::CUDA, k::Op::attention_backward, DType::F32))
    CHECK_THROWS(k::cuda::attention_backward(q, q, q, q, Tensor(), Tensor(), {}, k::AttentionArgs(), {}, Tensor(), {}));
  CHECK(k::supports(Device::CPU, k::Op::attention, DType::F64));
  CHECK(k::supports(Device::CUDA, k::Op::matmul, DType::F32) == cuda::built_with_cuda());
}

TEST_CASE("backend ops: NaN and Inf inputs propagate on every backend", "[backend]") {
  int checked = 0;
  for (Device dev : backends())
    for (const OpCase& c : cases::backend_cases()) {
      if (!c.nan_expected) continue;
      for (DType t : c.dtypes)
        if (cases::supported(c, t, dev))
          guarded_check(c.name + " " + dtype_str(t) + " on " + std::string(device_name(dev)), [&] {
            auto out = run_case(c, t, dev);
            for (double v : out[0].to_vector<double>())
              if (std::isnan(v)) return std::string();
            return std::string("no NaN in the output");
          });
      ++checked;
    }
  CHECK(checked >= 10);
}

TEST_CASE("backend ops: guard bytes catch an out-of-bounds write", "[backend]") {
  GuardScope on;
  {
    Tensor t = Tensor::empty({4}, DType::F32);
    t.data<float>()[4] = 1.0f;  // one past the end: lands in the guard bytes this mode adds
  }
  CHECK(guard::stats().violations == 1);
  CHECK(guard::stats().bad_bytes >= 1);
  { Tensor t = Tensor::zeros({3}, DType::F64); }
  CHECK(guard::stats().violations == 1);
  if (cuda::available()) {
    {
      Tensor t = Tensor::empty({4}, DType::F32, Device::CUDA);
      cuda::memset_device(static_cast<char*>(t.raw_data()) + 16, 0, 1);
    }
    CHECK(guard::stats().violations == 2);
  }
  guard::reset_stats();
}

TEST_CASE("backend ops: no kernel writes outside its outputs (guard bytes)", "[backend]") {
  GuardScope on;
  for (Device dev : backends())
    for (const OpCase& c : cases::backend_cases())
      for (DType t : c.dtypes)
        if (cases::supported(c, t, dev))
          guarded_check(c.name + " " + dtype_str(t) + " on " + std::string(device_name(dev)), [&] {
            const uint64_t before = guard::stats().violations;
            run_case(c, t, dev);  // every input, output and temporary is freed (and checked) by now
            return guard::stats().violations == before ? std::string() : std::string("guard bytes overwritten");
          });
  CHECK(guard::stats().guarded > 1000);
  CHECK(guard::stats().violations == 0);
}

TEST_CASE("backend ops: gradcheck (float64, cpu) of every differentiable case", "[backend][gradcheck]") {
  int checked = 0;
  for (const OpCase& c : cases::backend_cases()) {
    if (!c.grad) continue;
    std::vector<Tensor> in = cases::make_inputs(c, DType::F64, Device::CPU);
    // gradcheck takes float64 inputs only: index inputs are bound into the function.
    std::vector<Variable> all, vars;
    std::vector<int> slot;  // position in `all` of each gradcheck input
    for (size_t i = 0; i < in.size(); ++i) {
      all.emplace_back(in[i].contiguous(), c.inputs[i].differentiable());
      if (in[i].dtype() == DType::F64 && !c.inputs[i].constant) vars.push_back(all.back()), slot.push_back(int(i));
    }
    cases::GradFn fn = [&](const std::vector<Variable>& v) {
      std::vector<Variable> full = all;
      for (size_t j = 0; j < v.size(); ++j) full[size_t(slot[j])] = v[j];
      return c.grad(full);
    };
    guarded_check(c.name, [&] {
      GradcheckReport r = gradcheck(c.name, fn, vars);
      return r.ok && r.elements > 0 ? std::string() : r.str();
    });
    ++checked;
  }
  CHECK(checked >= 40);
}
