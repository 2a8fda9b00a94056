// The layering the folders show: every #include of a relpos header names its path from the
// repository root, that file exists in the source tree, and it points down the stack
// core <- kernels <- autograd <- nn <- trainers <- experiments <- cli (relpos::test::kLayers). Inside
// trainers/, io/ is the bottom, data/ and dist/ sit on it (and on the config), and the loop
// (trainers/*.cpp) on those.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "../helpers.h"

using namespace std::string_literals;
namespace fs = std::filesystem;

namespace {

// A layer's place in the stack: its index in relpos::test::kLayers.
const std::map<std::string, int> kLayerRank = [] {
  std::map<std::string, int> rank;
  for (const char* layer : relpos::test::kLayers) rank.emplace(layer, static_cast<int>(rank.size()));
  return rank;
}();

// The part of trainers/ a path is in: "io", "data", "dist", or "loop" (top level).
std::string trainers_part(const std::string& rel) {
  for (const char* p : {"io", "data", "dist"})
    if (rel.rfind("trainers/"s + p + "/", 0) == 0) return p;
  return "loop";
}

// What a part of trainers/ may include from trainers/ (trainers/config.h: the config every part reads).
bool trainers_include_allowed(const std::string& from, const std::string& to_path) {
  static const std::map<std::string, std::set<std::string>> allowed = {
      {"io", {"io"}},
      {"data", {"io", "data"}},
      {"dist", {"io", "data", "dist"}},
      {"loop", {"io", "data", "dist", "loop"}}};
  if (to_path == "trainers/config.h") return true;
  return allowed.at(from).count(trainers_part(to_path)) > 0;
}

// The violations in one file's text (rel: its path from the repository root).
std::vector<std::string> violations(const std::string& rel, std::istream& in, const fs::path& root) {
  static const std::regex include(R"(^\s*#\s*include\s*"([^"]+)\")");
  const std::string layer = rel.substr(0, rel.find('/'));
  std::vector<std::string> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::smatch m;
    if (!std::regex_search(line, m, include)) continue;
    const std::string path = m[1];
    const std::string at = rel + ":" + std::to_string(n) + ": " + line;
    const std::string top = path.substr(0, path.find('/'));
    if (path == "relpos/version.h" || path == "relpos_build_info.h") continue;  // generated at configure time
    if (!kLayerRank.count(top)) {
      // a sibling header by its plain name (kernels/cuda/*.cuh) is fine if it exists next to the file
      if (!fs::exists(root / fs::path(rel).parent_path() / path)) out.push_back(at + "  (not a path from the root)");
      continue;
    }
    if (!fs::exists(root / path)) out.push_back(at + "  (no such file in the source tree)");
    if (kLayerRank.at(top) > kLayerRank.at(layer)) out.push_back(at + "  (includes an upper layer)");
    if (layer == "trainers" && top == "trainers" && !trainers_include_allowed(trainers_part(rel), path))
      out.push_back(at + "  (" + trainers_part(rel) + " may not include trainers/" + trainers_part(path) + ")");
  }
  return out;
}

}  // namespace

TEST_CASE("layering: includes resolve in the source tree and point down the layers", "[structure]") {
  const fs::path root(RELPOS_SOURCE_DIR);
  std::vector<std::string> found;
  int files = 0;
  for (const auto& [layer, rank] : kLayerRank)
    for (const auto& e : fs::recursive_directory_iterator(root / layer)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh" && ext != ".inc"))
        continue;
      std::ifstream f(e.path());
      const std::string rel = fs::relative(e.path(), root).generic_string();
      for (auto& v : violations(rel, f, root)) found.push_back(v);
      ++files;
    }
  std::string all;
  for (const auto& l : found) all += l + "\n";
  INFO(all);
  CHECK(found.empty());
  CHECK(files > 150);
}

TEST_CASE("layering: the check finds an upward include, a missing file and a folder rule broken", "[structure]") {
  const fs::path root(RELPOS_SOURCE_DIR);
  std::istringstream up("#include \"trainers/trainer.h\"\n");
  CHECK(violations("nn/attention.cpp", up, root).size() == 1);
  std::istringstream missing("#include \"nn/no_such_header.h\"\n");
  CHECK(violations("nn/attention.cpp", missing, root).size() == 1);
  std::istringstream sideways("#include \"trainers/trainer.h\"\n");
  CHECK(violations("trainers/io/checkpoint.cpp", sideways, root).size() == 1);
  std::istringstream experiments("#include \"experiments/sweep.h\"\n");
  CHECK(violations("trainers/trainer.cpp", experiments, root).size() == 1);
  CHECK(violations("cli/verbs/sweep.cpp", experiments, root).empty());
  std::istringstream fine("#include \"core/tensor.h\"\n#include \"trainers/io/file_io.h\"\n");
  CHECK(violations("trainers/data/tasks.cpp", fine, root).empty());
}
