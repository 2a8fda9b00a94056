// fuzz/fuzz_common.h — helpers shared by the libFuzzer targets: a per-process scratch file
// (the readers under test take paths) and the rule every target enforces: bad input may
// only raise relpos::Error (a named error); anything else escapes and libFuzzer reports it.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace relpos::fuzz {

// /dev/shm/relpos_fuzz_<pid>_<name> (or /tmp when /dev/shm is missing), rewritten per input.
inline std::string scratch_path(const std::string& name) {
  const char* base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  return std::string(base) + "/relpos_fuzz_" + std::to_string(getpid()) + "_" + name;
}

inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
}

}  // namespace relpos::fuzz
