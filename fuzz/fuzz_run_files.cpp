// fuzz/fuzz_run_files.cpp — the files of a run and a sweep directory that relpos reads back:
// metrics.jsonl (MetricsWriter reopening it on resume: parse, drop a cut last line, drop rows
// after the resumed step, rewrite) and the sweep index (read_sweep_index: merge by name).
// Byte 0 picks the resumed step; the rest is the file. Must return or throw relpos::Error.
#include <cstdint>
#include <filesystem>
#include <string>

#include "fuzz_common.h"
#include "core/error.h"
#include "trainers/metrics.h"
#include "experiments/sweep.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const std::string dir = [] {
    std::string d = relpos::fuzz::scratch_path("run");
    std::filesystem::create_directories(d);
    return d;
  }();
  std::filesystem::remove(dir + "/metrics.csv");
  relpos::fuzz::write_file(dir + "/metrics.jsonl", data + 1, size - 1);
  relpos::fuzz::write_file(dir + "/sweep.jsonl", data + 1, size - 1);
  try {
    relpos::MetricsOptions opt;
    if (data[0] & 0x80) opt.resume_from_step = int64_t(data[0] & 0x7f);
    relpos::MetricsWriter w(dir, opt);
    w.log(1000, {{"loss", 1.5}});
  } catch (const relpos::Error&) {
  }
  try {
    (void)relpos::train::read_sweep_index(dir);
  } catch (const relpos::Error&) {
  }
  return 0;
}
