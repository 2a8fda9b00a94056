// tests/trainers/hostile_helpers.h — shared by the hostile suites: run the relpos binary like a
// user (exit code + output), a small fast config, temp directories.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "../cli_run.h"

namespace relpos::hostile {

// AddressSanitizer reserves terabytes of address space: an address-space limit (ulimit -v)
// cannot be tested in the sanitizer build.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

namespace fs = std::filesystem;

using Run = test::CliRun;

// The CLI with `args`, bounded by `timeout` seconds (a hang shows as exit 137, never a stuck test).
inline Run cli(const std::string& args, int timeout = 120) { return test::cli_run(args, timeout); }

inline std::string tmp(const std::string& name) {
  std::string d = (fs::temp_directory_path() / ("relpos_hostile_" + name)).string();
  fs::remove_all(d);
  return d;
}

inline void write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A copy-task decoder that trains in well under a second.
inline std::string tiny_yaml(const std::string& dir, int steps = 6, const std::string& extra_train = "") {
  return "model:\n  d_model: 16\n  n_layers: 1\n  n_heads: 2\n  d_ff: 32\n  max_len: 32\n  position:\n    type: t5\n"
         "data:\n  task: copy\n  vocab_size: 6\n  seq_len: 4\n  batch_size: 4\n"
         "optim:\n  lr: 1.0e-3\n"
         "train:\n  steps: " + std::to_string(steps) +
         "\n  eval_every: 3\n  eval_batches: 1\n  log_every: 3\n  checkpoint_every: 3\n  keep_last: 0\n" + extra_train +
         "output:\n  dir: " + dir + "\n";
}

}  // namespace relpos::hostile
