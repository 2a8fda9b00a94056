// The config schema (one table of keys per section, trainers/config.cpp) against what it
// drives: the key tables of docs/config.md are generated from it; every documented literal
// default is what an absent key gives; every documented range and choice list is what
// parsing enforces; unknown keys at any depth get a suggestion from the table.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <regex>

#include "trainers/config.h"

using namespace relpos;
using Catch::Contains;

namespace {

train::Config parse(const std::string& yaml) { return train::parse_config(yaml, "schema.yaml"); }

// "section:\n  a:\n    b: value\n" for the dotted key "a.b".
std::string yaml_for(const std::string& section, const std::string& key, const std::string& value) {
  std::string out = section + ":\n", indent = "  ";
  std::string rest = key;
  for (size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1)) {
    out += indent + rest.substr(0, dot) + ":\n";
    indent += "  ";
  }
  return out + indent + rest + ": " + value + "\n";
}

std::string unquote(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), '`'), s.end());
  return s;
}

// A documented bound: "12", "-3" or "2^20".
long long bound(const std::string& s) {
  const auto caret = s.find('^');
  return caret == std::string::npos ? std::stoll(s) : 1LL << std::stoi(s.substr(caret + 1));
}

// The config with one key set, compared section by section with the all-defaults config.
bool same_as_defaults(const train::Config& c, const train::Config& d) {
  return c.model == d.model && c.data == d.data && c.optim == d.optim && c.train == d.train &&
         c.output_dir == d.output_dir;
}

}  // namespace

TEST_CASE("config schema: docs/config.md's key tables are the generated ones", "[config][docs]") {
  std::ifstream f(std::string(RELPOS_SOURCE_DIR) + "/docs/config.md");
  REQUIRE(f.good());
  const std::string doc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (const std::string& section : train::config_sections()) {
    INFO("section " << section << ": regenerate with `relpos list --config --markdown` and paste the block");
    const std::string begin = "<!-- begin: relpos list --config --markdown: " + section + " -->\n",
                      end = "<!-- end: " + section + " -->";
    const auto b = doc.find(begin);
    REQUIRE(b != std::string::npos);
    const auto e = doc.find(end, b);
    REQUIRE(e != std::string::npos);
    CHECK(doc.substr(b + begin.size(), e - b - begin.size()) == train::config_keys_markdown(section));
  }
}

TEST_CASE("config schema: every documented literal default is what an absent key gives", "[config]") {
  const train::Config defaults = parse("");
  int checked = 0;
  for (const std::string& section : train::config_sections())
    for (const auto& k : train::config_key_docs(section)) {
      // computed or per-encoding defaults are not literals
      if (k.default_value.find_first_of("·(") != std::string::npos || k.default_value == "per encoding") continue;
      const std::string y = yaml_for(section, k.key, unquote(k.default_value));
      INFO(y);
      train::Config c = parse(y);
      CHECK(same_as_defaults(c, defaults));
      ++checked;
    }
  CHECK(checked >= 50);
}

TEST_CASE("config schema: each documented range and choice list is enforced, naming the key", "[config]") {
  const std::regex int_range(R"(int in \[([-0-9^]+), ([-0-9^]+)\])"), int_min(R"(int ≥ ([-0-9^]+))");
  int checked = 0;
  for (const std::string& section : train::config_sections())
    for (const auto& k : train::config_key_docs(section)) {
      const std::string dotted = section + "." + k.key;
      std::smatch m;
      std::vector<std::string> bad;
      if (std::regex_search(k.type, m, int_range)) {
        bad = {std::to_string(bound(m[1]) - 1), std::to_string(bound(m[2]) + 1)};
      } else if (std::regex_search(k.type, m, int_min)) {
        bad = {std::to_string(bound(m[1]) - 1)};
      } else if (k.type.rfind("`", 0) == 0) {  // a closed choice
        bad = {"no_such_choice"};
      } else if (k.type == "bool") {
        bad = {"maybe"};
      } else {
        continue;
      }
      for (const std::string& v : bad) {
        INFO(dotted << " = " << v);
        CHECK_THROWS_WITH(parse(yaml_for(section, k.key, v)), Contains(dotted));
        ++checked;
      }
    }
  CHECK(checked >= 40);
}

TEST_CASE("config schema: an unknown key at any depth names the key and suggests one from the table", "[config]") {
  CHECK_THROWS_WITH(parse("model:\n  bias_scale:\n    enabeld: true\n"),
                    Contains("model.bias_scale.enabeld") && Contains("did you mean 'enabled'"));
  CHECK_THROWS_WITH(parse("optim:\n  schedul: cosine\n"), Contains("optim.schedul") && Contains("did you mean 'schedule'"));
  CHECK_THROWS_WITH(parse("model:\n  init:\n    sdt: 0.1\n"), Contains("model.init.sdt") && Contains("did you mean 'std'"));
  CHECK_THROWS_WITH(parse("trian:\n  steps: 3\n"), Contains("trian") && Contains("did you mean 'train'"));
}

TEST_CASE("config schema: closed choices are enums whose names round-trip", "[config]") {
  const train::Config c = parse(
      "model:\n  norm: post\n  norm_type: rmsnorm\n  attention: reference\n  qk_norm: layernorm\n"
      "optim:\n  name: sgd\n  schedule: linear\ntrain:\n  nan_policy: skip\n");
  CHECK(c.model.norm == nn::NormPlacement::Post);
  CHECK(c.model.norm_type == nn::NormType::RMSNorm);
  CHECK(c.model.attention == nn::AttentionImpl::Reference);
  CHECK(c.model.stability.qk_norm == nn::QkNorm::LayerNorm);
  CHECK(c.optim.name == nn::optim::OptimizerKind::SGD);
  CHECK(c.optim.schedule == nn::optim::LrSchedule::WarmupLinear);
  CHECK(c.train.nan_policy == train::NanPolicy::Skip);
  CHECK(fmt::format("{} {} {}", c.model.norm, c.optim.schedule, c.train.device) == "post linear cpu");
}
