// core/env.cpp — see env.h. The one list of environment switches.
#include "core/env.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace relpos {
namespace {

std::string one_of(std::string_view v, std::initializer_list<const char*> ok) {
  std::string list;
  size_t i = 0;
  for (const char* o : ok) {
    if (v == o) return "";
    list += (i == 0 ? "'" : i + 1 == ok.size() ? " or '" : ", '") + std::string(o) + "'";
    ++i;
  }
  return "expected " + list;
}

std::string zero_one(std::string_view v) { return one_of(v, {"0", "1"}); }
std::string any_path(std::string_view v) {
  return v.find('\0') == std::string_view::npos ? "" : "expected a path (no NUL byte)";
}

// s is a decimal integer in [lo, hi] (0 <= lo): digits only, no overflow whatever their number.
bool integer(std::string_view s, long long lo, long long hi) {
  if (s.empty()) return false;
  long long n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    if (n > (hi - (c - '0')) / 10) return false;  // n * 10 + digit would pass hi (or overflow)
    n = n * 10 + (c - '0');
  }
  return n >= lo && n <= hi;
}

std::string fault(std::string_view v) {
  const size_t a = v.find(':'), b = a == std::string_view::npos ? a : v.find(':', a + 1);
  const char* expected =
      "expected KIND:RANK:STEP (KIND hang, exit, diverge or stall; RANK and STEP non-negative integers)";
  if (b == std::string_view::npos) return expected;
  const std::string_view kind = v.substr(0, a), rank = v.substr(a + 1, b - a - 1), step = v.substr(b + 1);
  if (!one_of(kind, {"hang", "exit", "diverge", "stall"}).empty()) return expected;
  if (!integer(rank, 0, 1 << 20) || !integer(step, 0, (1LL << 62))) return expected;
  return "";
}

}  // namespace

const std::vector<EnvSwitch>& env_switches() {
  static const std::vector<EnvSwitch> table = {
      {"RELPOS_GEMM", "openblas | onednn", "the float32 CPU GEMM library (default: oneDNN when built with it)",
       "kernels/cpu/gemm.cpp", false, [](std::string_view v) { return one_of(v, {"openblas", "onednn"}); }},
      {"RELPOS_TILE_GEMM", "amxbf16 | avx512bf16 | avx512 | avx2 | openblas",
       "forces the tile ISA of the CPU GEMM and fused attention (default: the best this CPU runs)",
       "kernels/cpu/tile_gemm.cpp", false,
       [](std::string_view v) { return one_of(v, {"amxbf16", "avx512bf16", "avx512", "avx2", "openblas"}); }},
      {"RELPOS_BLAS_CORE", "keep", "keep OpenBLAS's own core choice (default: a fallback core is replaced)",
       "kernels/cpu/blas_core.cpp", false, [](std::string_view v) { return one_of(v, {"keep"}); }},
      {"RELPOS_OP_PROFILE", "0 | 1", "1: every op timed, one table at exit", "kernels/dispatch.cpp", false, zero_one},
      {"RELPOS_GEMM_PROFILE", "0 | 1", "1: every CPU GEMM's shape and time, one table at exit",
       "kernels/cpu/gemm.cpp", false, zero_one},
      {"RELPOS_CUDA_STATS", "0 | 1", "1: each training step's host-device transfers, logged", "trainers/trainer.cpp",
       false, zero_one},
      {"RELPOS_REPORT_SCRIPT", "a path", "the report script `relpos report` runs (default: the installed report.py)",
       "cli/verbs/report.cpp", false, any_path},
      {"RELPOS_PYTHON", "a program", "the Python `relpos report` runs (default: python3)", "cli/verbs/report.cpp",
       false, any_path},
      {"RELPOS_FAULT", "hang | exit | diverge | stall :RANK:STEP",
       "test hook: makes one rank of a data-parallel run misbehave at a step; refused in a single-process run",
       "trainers/dist/data_parallel.cpp", true, fault},
      {"RELPOS_REQUIRE_CUDA", "0 | 1", "test hook: 1 makes relpos_cuda_tests fail (not skip) without a usable GPU",
       "tests/cuda/main.cpp", true, zero_one},
      {"RELPOS_TRAJECTORY_VERBOSE", "set", "test hook: relpos_tests prints the model-trajectory comparison",
       "tests/nn/test_model_trajectory.cpp", true, [](std::string_view) { return std::string(); }},
  };
  return table;
}

const EnvSwitch& env_switch_row(std::string_view name) {
  for (const EnvSwitch& s : env_switches())
    if (name == s.name) return s;
  fail("{} is not in the table of environment switches (core/env.cpp)", name);
}

std::string echo_value(std::string_view v, size_t max) {
  std::string out;
  const size_t n = std::min(v.size(), max);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(v[i]);
    if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += char(c);
  }
  if (v.size() > max) out += fmt::format("... ({} bytes in all)", v.size());
  return out;
}

std::string env_problem(std::string_view name, std::string_view value) {
  const EnvSwitch* row = nullptr;
  for (const EnvSwitch& s : env_switches())
    if (name == s.name) row = &s;
  if (!row) return "";  // not a switch of relpos
  if (value.empty()) return "";  // empty: unset
  const std::string why = row->check(value);
  return why.empty() ? "" : fmt::format("environment {}={}: {}", row->name, echo_value(value), why);
}

std::string env_value(std::string_view name) {
  const EnvSwitch& row = env_switch_row(name);
  const char* v = std::getenv(row.name);
  if (!v) return "";
  const std::string problem = env_problem(name, v);
  if (!problem.empty()) throw ConfigError(problem);
  return v;
}

void validate_environment() {
  for (const EnvSwitch& s : env_switches()) (void)env_value(s.name);
}

std::string env_switches_markdown() {
  const auto cell = [](std::string_view t) {  // a '|' inside a table cell is escaped
    std::string o;
    for (char c : t) o += c == '|' ? std::string("\\|") : std::string(1, c);
    return o;
  };
  std::string md = "| variable | values | meaning | read in |\n|---|---|---|---|\n";
  for (const EnvSwitch& s : env_switches())
    md += fmt::format("| `{}` | {} | {}{} | `{}` |\n", s.name, cell(s.values), cell(s.meaning),
                      s.test_only ? " (test only)" : "", s.read_by);
  return md;
}

}  // namespace relpos
