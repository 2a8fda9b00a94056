// fuzz/fuzz_sweep_spec.cpp — a sweep spec file: YAML parsing (one document, alias limit), the
// typed schema reads, grid expansion under the point limit, every point's config. Must return
// or throw relpos::Error (a yaml-cpp exception escaping is a finding). The point limit is kept
// small so a grid cannot make one input slow.
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "core/error.h"
#include "experiments/sweep.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = relpos::fuzz::scratch_path("spec.yaml");
  relpos::fuzz::write_file(path, data, size);
  try {
    relpos::train::SweepSpec s = relpos::train::load_sweep_spec(path, /*max_points=*/16);
    if (s.points.size() > 16) std::abort();  // the limit was not enforced
  } catch (const relpos::Error&) {
  }
  return 0;
}
