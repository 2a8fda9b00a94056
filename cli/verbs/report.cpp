// relpos report RUN_DIR|SWEEP_DIR [--out D]
// A Markdown report with PNG figures, written by scripts/report.py (matplotlib) run with
// /usr/bin/python3 ($RELPOS_PYTHON overrides). The script is found in the source tree the
// executable was built from (RELPOS_SOURCE_DIR) or at $RELPOS_REPORT_SCRIPT.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/env.h"
#include "cli/command.h"

namespace relpos::cli {
namespace {

struct Args {
  std::string dir, out;
};

int run(const Args& a) {
  const std::string script_env = env_value("RELPOS_REPORT_SCRIPT"), py_env = env_value("RELPOS_PYTHON");
  const std::string script = !script_env.empty() ? script_env : std::string(RELPOS_SOURCE_DIR) + "/scripts/report.py";
  if (!std::filesystem::exists(script)) throw Error(fmt::format("report: script '{}' not found", script));
  if (!std::filesystem::is_directory(a.dir)) throw UsageError(fmt::format("report: '{}' is not a directory", a.dir));
  // Debian's matplotlib lives with the system interpreter; $RELPOS_PYTHON overrides.
  const std::string py = !py_env.empty()                               ? py_env
                         : std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3"
                                                                       : "python3";
  const std::string cmd = shell_quote(py) + " " + shell_quote(script) + " " + shell_quote(a.dir) +
                          (a.out.empty() ? "" : " --out " + shell_quote(a.out));
  std::fflush(stdout);
  // The plots need no BLAS threads; one keeps numpy's OpenBLAS buffers within an address-space
  // limit (its initialiser, like relpos's, would otherwise spin on a failed allocation).
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  setenv("OMP_NUM_THREADS", "1", 1);
  const int rc = std::system(cmd.c_str());
  if (rc != 0) throw Error(fmt::format("report: '{}' failed (status {})", cmd, rc));
  return 0;
}

Action setup(CLI::App& cmd) {
  auto a = std::make_shared<Args>();
  cmd.add_option("dir", a->dir, "run directory or sweep directory")->required();
  cmd.add_option("--out", a->out, "output directory (default: DIR/report)");
  return [a](Context&) { return run(*a); };
}

}  // namespace

Command report_command() {
  return {"report", "write a Markdown report with PNG figures for a run or a sweep", setup};
}

}  // namespace relpos::cli
