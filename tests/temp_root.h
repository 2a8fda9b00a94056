// tests/temp_root.h — every test process works in a temporary directory of its own.
//
// The test mains create $TMPDIR/relpos_tests.XXXXXX (mkdtemp), point TMPDIR at it for the
// whole process (std::filesystem::temp_directory_path() and the `relpos` subprocesses the CLI
// tests start read TMPDIR), and remove it with everything in it when the process ends. Tests
// therefore never collide on a fixed name (ctest -j runs them side by side) and leave nothing
// behind; the ctest `test_tmp_is_clean` (tests/CMakeLists.txt) checks the latter.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace relpos::test {

class TempRoot {
 public:
  TempRoot() {
    const char* parent = std::getenv("TMPDIR");
    std::string templ = std::string(parent && *parent ? parent : "/tmp") + "/relpos_tests.XXXXXX";
    if (!::mkdtemp(templ.data())) {
      std::fprintf(stderr, "tests: cannot create a temporary directory from '%s'\n", templ.c_str());
      std::exit(1);
    }
    dir_ = templ;
    ::setenv("TMPDIR", dir_.c_str(), 1);
  }
  ~TempRoot() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempRoot(const TempRoot&) = delete;
  TempRoot& operator=(const TempRoot&) = delete;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace relpos::test
