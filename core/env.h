// core/env.h — THE table of relpos's environment switches: name, values, meaning, where read.
// Every RELPOS_* variable the program (or its test executables) reads is a row here; a bad
// value is one ConfigError, the same everywhere, raised at startup (validate_environment(),
// called by the CLI's main before any verb runs and before BLAS or thread pools start).
// `relpos info` prints every row and its value; `relpos list --env --markdown` prints the
// table of docs/config.md (a test compares them); tests/core/test_env.cpp checks that every
// getenv("RELPOS_...") in the sources names a row.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace relpos {

struct EnvSwitch {
  const char* name;
  const char* values;   // the accepted values, as a user reads them
  const char* meaning;
  const char* read_by;  // where it is read (file or executable)
  bool test_only;       // a test hook: refuses to act outside the configuration it is for
  // "" when `value` (set, non-empty) is acceptable, else what was expected.
  std::string (*check)(std::string_view value);
};

const std::vector<EnvSwitch>& env_switches();

// The row of `name`; throws relpos::Error for a name that is not in the table (a programming
// error: every getenv of a RELPOS_ switch goes through env_value).
const EnvSwitch& env_switch_row(std::string_view name);

// The value of a switch of the table ("" when unset); a bad value throws ConfigError.
std::string env_value(std::string_view name);

// "" when `value` is acceptable for the switch `name`, else the error message (bounded echo
// of the value). Pure: the fuzz target drives it.
std::string env_problem(std::string_view name, std::string_view value);

// Every switch of the table that is set; the first bad value throws ConfigError
// ("RELPOS_X=...: expected ...").
void validate_environment();

// The Markdown table of docs/config.md (between its markers).
std::string env_switches_markdown();

// A value for a message: at most `max` bytes (then "... (N bytes in all)"), control bytes
// (below 0x20, 0x7f) escaped as \xNN, so a message never carries a terminal escape or a megabyte.
std::string echo_value(std::string_view v, size_t max = 200);

}  // namespace relpos
