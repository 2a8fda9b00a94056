// fuzz/fuzz_config.cpp — the YAML config loader with --set overrides. Input: the YAML text,
// then optionally NUL-separated override strings ("a.b=value"). parse_config must either
// return a config or throw relpos::Error (ConfigError); a crash, a sanitizer report or any
// other exception is a finding.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "trainers/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= in.size(); ++i)
    if (i == in.size() || in[i] == '\0') {
      parts.push_back(in.substr(start, i - start));
      start = i + 1;
    }
  std::string yaml = parts.front();
  std::vector<std::string> sets(parts.begin() + 1, parts.end());
  try {
    relpos::train::Config c = relpos::train::parse_config(yaml, "fuzz.yaml", sets);
    // The effective YAML is what a checkpoint stores: it must parse again.
    (void)relpos::train::parse_config(c.yaml, "fuzz.yaml (effective)");
  } catch (const relpos::Error&) {
  }
  return 0;
}
