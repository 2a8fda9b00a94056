// tests/cli_run.h — run the built relpos binary (RELPOS_CLI_PATH) like a user: its exit code and
// its output (stdout and stderr together). Shared by every test that drives the CLI.
#pragma once
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

namespace relpos::test {

struct CliRun {
  int code;  // exit status; -N when killed by signal N (a crash is never an acceptable outcome)
  std::string out;
};

// A word for sh, in single quotes (paths may hold spaces or quotes).
inline std::string shell_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

// sh -c `cmd`: its exit code and its output (stdout and stderr together).
inline CliRun shell_run(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status), out};
}

// `relpos <args>`, killed after `timeout` seconds: a hang shows as exit 137 (timeout's
// SIGKILL), never as a stuck test.
inline CliRun cli_run(const std::string& args, int timeout = 300) {
  return shell_run("timeout -s KILL " + std::to_string(timeout) + " " + shell_quote(RELPOS_CLI_PATH) + " " + args);
}

}  // namespace relpos::test
