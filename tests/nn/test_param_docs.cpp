// The per-encoding parameter documentation (nn/positional/param_docs.cpp) against the
// registry and the variants themselves, and docs/config.md against both: every accepted key is
// documented (and nothing else), literal defaults are accepted, and the table in
// docs/config.md is exactly `relpos list --params --markdown`.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/rng.h"
#include "nn/positional/param_docs.h"
#include "nn/positional/registry.h"

using namespace relpos;
using namespace relpos::nn;

namespace {

PositionConfig sized(const std::string& type, std::map<std::string, std::string> kv) {
  PositionConfig pc;
  pc.type = type;
  pc.d_model = 16;
  pc.n_heads = 2;
  pc.head_dim = 8;
  pc.max_len = 64;
  if (type == "relative_2d") kv.insert({{"grid_h", "2"}, {"grid_w", "3"}});
  pc.params = PositionParams(kv);
  return pc;
}

// The keys a variant accepts, read from its check_known error ("...; known: a, b, c").
std::set<std::string> accepted_keys(const std::string& type) {
  Generator g(0);
  try {
    make_position_encoding(sized(type, {{"zz_not_a_parameter", "1"}}), g);
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    auto at = msg.find("known: ");
    REQUIRE(at != std::string::npos);
    std::set<std::string> keys;
    std::stringstream ss(msg.substr(at + 7));
    for (std::string k; std::getline(ss, k, ',');) {
      while (!k.empty() && k.front() == ' ') k.erase(k.begin());
      if (!k.empty()) keys.insert(k);
    }
    return keys;
  }
  FAIL("position '" << type << "' accepted an unknown parameter");
  return {};
}

bool literal(const std::string& s) {
  return !s.empty() && s.find(' ') == std::string::npos && s.find('.') != 0 && s.rfind("model.", 0) != 0 &&
         s != "head_dim" && s != "required";
}

}  // namespace

TEST_CASE("param docs: every variant documents exactly the parameters it accepts", "[nn][docs]") {
  for (const auto& v : position_variants()) {
    INFO("position " << v.name);
    std::set<std::string> documented;
    for (const auto& d : position_param_docs(v.name)) {
      REQUIRE(!d.type.empty());
      REQUIRE(!d.default_value.empty());
      REQUIRE(!d.meaning.empty());
      documented.insert(d.name);
    }
    REQUIRE(documented == accepted_keys(v.name));
  }
}

TEST_CASE("param docs: literal defaults are accepted values", "[nn][docs]") {
  for (const auto& v : position_variants())
    for (const auto& d : position_param_docs(v.name)) {
      if (!literal(d.default_value)) continue;
      INFO("position " << v.name << " " << d.name << "=" << d.default_value);
      Generator g(0);
      REQUIRE_NOTHROW(make_position_encoding(sized(v.name, {{d.name, d.default_value}}), g));
    }
}

TEST_CASE("param docs: docs/config.md holds the table of `relpos list --params --markdown`", "[nn][docs]") {
  std::ifstream f(std::string(RELPOS_SOURCE_DIR) + "/docs/config.md");
  REQUIRE(f.good());
  std::string doc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::string begin = "<!-- begin: relpos list --params --markdown -->\n", end = "<!-- end: relpos list --params -->";
  auto b = doc.find(begin), e = doc.find(end);
  REQUIRE(b != std::string::npos);
  REQUIRE(e != std::string::npos);
  const std::string in_doc = doc.substr(b + begin.size(), e - b - begin.size());
  INFO("regenerate: relpos list --params --markdown, paste between the markers in docs/config.md");
  REQUIRE(in_doc == position_params_markdown());
}
