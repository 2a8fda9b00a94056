// No function outside kernels/ is longer than 80 lines (kernels may keep a long loop nest in
// one piece): a function that long is several phases that deserve names. A function here is
// a definition that starts at column 0 (namespace scope: free functions and out-of-class
// member definitions) and ends at the next line that is exactly "}".
#include <catch2/catch.hpp>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

constexpr int kMaxLines = 80;

bool starts_definition(const std::string& l) {
  if (l.empty() || std::isspace(static_cast<unsigned char>(l[0])) || l.find('(') == std::string::npos) return false;
  for (const char* skip : {"//", "#", "namespace", "}", "struct", "class", "enum", "using", "template", "static_assert",
                           "extern", "TEST_CASE"})
    if (l.rfind(skip, 0) == 0) return false;
  return true;
}

// "file:line name (N lines)" for every definition longer than kMaxLines.
std::vector<std::string> long_functions(const fs::path& file) {
  std::vector<std::string> lines, found;
  std::ifstream f(file);
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!starts_definition(lines[i])) continue;
    size_t open = i;  // the signature may run over a few lines; a declaration ends in ';'
    while (open < lines.size() && open < i + 8 && (lines[open].empty() || lines[open].back() != '{')) {
      if (!lines[open].empty() && lines[open].back() == ';') break;
      ++open;
    }
    if (open >= lines.size() || open >= i + 8 || lines[open].empty() || lines[open].back() != '{') continue;
    size_t close = open + 1;
    while (close < lines.size() && lines[close] != "}") ++close;
    const size_t n = close - i + 1;
    if (n > size_t(kMaxLines))
      found.push_back(fs::relative(file, RELPOS_SOURCE_DIR).string() + ":" + std::to_string(i + 1) + " " +
                      lines[i].substr(0, 80) + " (" + std::to_string(n) + " lines)");
    i = close;
  }
  return found;
}

}  // namespace

TEST_CASE("source: no function outside kernels/ is longer than 80 lines", "[structure]") {
  std::vector<std::string> found;
  int files = 0;
  for (const char* top : {"core", "autograd", "nn", "trainers", "cli"})
    for (const auto& e : fs::recursive_directory_iterator(fs::path(RELPOS_SOURCE_DIR) / top)) {
      const fs::path& p = e.path();
      if (!e.is_regular_file() || (p.extension() != ".cpp" && p.extension() != ".h" && p.extension() != ".cu")) continue;
      ++files;
      for (auto& l : long_functions(p)) found.push_back(l);
    }
  CHECK(files > 50);
  std::string all;
  for (const auto& l : found) all += l + "\n";
  INFO("split these into named phases:\n" << all);
  CHECK(found.empty());
}

TEST_CASE("source: the function-length check finds a long function", "[structure]") {
  // The check itself can fail: a 90-line function in a scratch file is reported.
  const fs::path p = fs::temp_directory_path() / "relpos_long_function.cpp";
  {
    std::ofstream f(p);
    f << "int long_one(int x) {\n";
    for (int i = 0; i < 90; ++i) f << "  x += " << i << ";\n";
    f << "  return x;\n}\n\nint short_one() {\n  return 1;\n}\n";
  }
  const std::vector<std::string> found = long_functions(p);
  fs::remove(p);
  REQUIRE(found.size() == 1);
  CHECK_THAT(found[0], Catch::Contains("long_one") && Catch::Contains("(93 lines)"));
}
