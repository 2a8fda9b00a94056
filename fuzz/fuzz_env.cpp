// fuzz/fuzz_env.cpp — the table of environment switches (core/env.cpp): a NAME=VALUE line
// (the name picked from the table by the first byte, or taken from the input), checked by
// env_problem and, when set, by env_value and validate_environment. Must return or throw
// relpos::ConfigError; an accepted value must be one the row's check accepts, a refused one
// must name the switch; echo_value must stay bounded and free of control bytes.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/env.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& table = relpos::env_switches();
  if (size == 0) return 0;
  const std::string in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t eq = in.find('=');
  const std::string name = eq == std::string::npos ? table[data[0] % table.size()].name : in.substr(0, eq);
  const std::string value = eq == std::string::npos ? in : in.substr(eq + 1);
  const std::string problem = relpos::env_problem(name, value);
  if (!problem.empty() && problem.find(name) == std::string::npos) std::abort();  // must name the switch
  if (problem.size() > 4096) std::abort();                                        // bounded echo
  const std::string echoed = relpos::echo_value(value, 64);
  for (char c : echoed)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) std::abort();
  if (value.find('\0') != std::string::npos || name.find('\0') != std::string::npos || name.empty()) return 0;
  bool in_table = false;
  for (const auto& s : table) in_table = in_table || name == s.name;
  if (!in_table) return 0;
  setenv(name.c_str(), value.c_str(), 1);
  try {
    const std::string got = relpos::env_value(name);
    if (!problem.empty() || got != value) std::abort();  // a refused value must not be returned
    relpos::validate_environment();
  } catch (const relpos::ConfigError&) {
    if (problem.empty()) std::abort();  // refused by one path, accepted by the other
  }
  unsetenv(name.c_str());
  return 0;
}
