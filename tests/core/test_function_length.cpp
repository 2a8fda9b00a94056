// No function of the library, the executable, the benchmarks, the examples or the fuzz targets is
// longer than 80 lines (kernels included): a function that long is several phases that deserve
// names. A function here is a definition that starts at column 0 (namespace scope: free
// functions and out-of-class member definitions) and ends at the next line that is exactly "}".
#include <catch2/catch.hpp>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include "../helpers.h"

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

// l without a trailing // comment and the blanks before it.
std::string code_of(const std::string& l) {
  const size_t c = l.find("//");
  std::string s = c == std::string::npos ? l : l.substr(0, c);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

// "file:line name (N lines)" for every definition longer than kMaxLines.
std::vector<std::string> long_functions(const fs::path& file) {
  std::vector<std::string> lines, found;
  std::ifstream f(file);
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!starts_definition(lines[i])) continue;
    size_t open = i;  // the signature may run over a few lines; a declaration ends in ';'
    while (open < lines.size() && open < i + 8 && (code_of(lines[open]).empty() || code_of(lines[open]).back() != '{')) {
      if (!code_of(lines[open]).empty() && code_of(lines[open]).back() == ';') break;
      ++open;
    }
    if (open >= lines.size() || open >= i + 8 || code_of(lines[open]).empty() || code_of(lines[open]).back() != '{')
      continue;
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

TEST_CASE("source: no function outside tests/ is longer than 80 lines", "[structure]") {
  std::vector<std::string> found;
  int files = 0;
  std::vector<std::string> tops(relpos::test::kLayers.begin(), relpos::test::kLayers.end());
  for (const char* more : {"bench", "examples", "fuzz"}) tops.push_back(more);
  for (const std::string& top : tops)
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
    // a declaration with a trailing comment is not the start of a definition (nor is the struct
    // after it, which a declaration taken for a signature would run into)
    f << "int declared(int x);  // a comment\nstruct S {\n";
    for (int i = 0; i < 90; ++i) f << "  int m" << i << ";\n";
    f << "};\n\nint short_two() {\n  return 2;\n}\n";
  }
  const std::vector<std::string> found = long_functions(p);
  fs::remove(p);
  REQUIRE(found.size() == 1);
  CHECK_THAT(found[0], Catch::Contains("long_one") && Catch::Contains("(93 lines)"));
}
