// core/error.h — the one exception type of relpos and the checks that throw it.
// User-facing mistakes (shapes, dtypes, config keys, files) throw relpos::Error with a
// message that names the thing and what was expected. Nothing aborts on user input.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace relpos {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// A mistake in user configuration (YAML keys/values, CLI parameters): the CLI exits with 2.
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& msg) : Error(msg) {}
};

template <typename... Args>
[[noreturn]] void fail_config(fmt::format_string<Args...> f, Args&&... args) {
  throw ConfigError(fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace relpos

// RELPOS_CHECK(cond, "fmt {}", args...) — throw relpos::Error when cond is false.
// RELPOS_CHECK_CONFIG — the same for configuration mistakes (relpos::ConfigError).
#define RELPOS_CHECK(cond, ...)            \
  do {                                     \
    if (!(cond)) ::relpos::fail(__VA_ARGS__); \
  } while (0)

#define RELPOS_CHECK_CONFIG(cond, ...)            \
  do {                                            \
    if (!(cond)) ::relpos::fail_config(__VA_ARGS__); \
  } while (0)
