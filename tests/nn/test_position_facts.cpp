// An encoding declares its facts in its own file (PositionVariant::facts, nn/positional/<name>.cpp):
// config validation, inspect, gradcheck and the CLI read them. This file checks that nothing
// outside nn/positional/ decides by comparing a position-type name, and that the declared facts
// agree with what the encodings do.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "nn/positional/registry.h"
#include "../helpers.h"

using namespace relpos;
namespace fs = std::filesystem;

TEST_CASE("position facts: no position-type name is compared outside nn/positional", "[registry][structure]") {
  std::string names;
  for (const auto& v : nn::position_variants()) names += (names.empty() ? "" : "|") + v.name;
  // `x == "t5"`, `"t5" != x`, on a line that speaks of a position or a type (other closed
  // choices share words such as "none": qk_norm)
  const std::regex compare("(==|!=)\\s*\"(" + names + ")\"|\"(" + names + ")\"\\s*(==|!=)");
  const std::regex about_position("position|type");
  std::vector<std::string> found;
  for (const char* top : test::kLayers) {
    const fs::path root = fs::path(RELPOS_SOURCE_DIR) / top;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      const fs::path& p = e.path();
      if (!e.is_regular_file() || (p.extension() != ".cpp" && p.extension() != ".h" && p.extension() != ".cu")) continue;
      if (p.string().find("/nn/positional/") != std::string::npos) continue;  // the module that owns them
      std::ifstream f(p);
      std::string line;
      for (int n = 1; std::getline(f, line); ++n)
        if (std::regex_search(line, compare) && std::regex_search(line, about_position))
          found.push_back(fs::relative(p, RELPOS_SOURCE_DIR).string() + ":" + std::to_string(n) + ": " + line);
    }
  }
  std::string all;
  for (const auto& l : found) all += l + "\n";
  INFO("compare PositionFacts (nn/positional/registry.h) instead of the type name:\n" << all);
  CHECK(found.empty());
}

TEST_CASE("position facts: the declared facts agree with the encodings", "[registry]") {
  for (const auto& v : nn::position_variants()) {
    INFO(v.name);
    const nn::PositionFacts& f = v.facts;
    // an index supplied by the data is looked up, never a distance; such encodings are bidirectional
    if (!f.index_task.empty()) CHECK((f.index_bias && !v.causal_capable && !f.probe_score_terms));
    // the gradcheck parameters are parameters the encoding declares and accepts
    nn::PositionConfig pc;
    pc.type = v.name;
    pc.d_model = 8;
    pc.n_heads = 2;
    pc.head_dim = 4;
    pc.max_len = 16;
    pc.params = nn::PositionParams(f.gradcheck_params);
    pc.channels = f.position_channels;  // ast reads its tree from a data channel
    Generator g(0);
    CHECK_NOTHROW(nn::make_position_encoding(pc, g));
    nn::PositionEncodingPtr pos = nn::make_position_encoding(pc, g);
    // a note for "no additive bias" only where there is none to show
    // (an encoding that reads data channels has its bias only with them: `relpos bias` shows the note)
    if (!f.no_bias_note.empty() && f.index_task.empty() && f.position_channels.empty()) {
      nn::AttnGeometry geo{3, 3, 0, 0, v.causal_capable};
      CHECK_FALSE(pos->toeplitz_bias(geo).defined());
      CHECK_FALSE(pos->score_bias(geo).defined());
    }
  }
}
