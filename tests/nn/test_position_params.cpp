// Each encoding's parameter schema (PositionVariant::params, declared in its own file) against
// what the encoding does: it accepts exactly the declared keys, refuses bad values when bound,
// uses the declared literal default when a key is absent, and docs/config.md's table is
// exactly `relpos list --params --markdown`.
#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/rng.h"
#include "nn/models.h"
#include "nn/positional/params.h"
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
  // an encoding with grid parameters gets a small explicit grid (as a patch_grid task gives it)
  if (find_position_variant(type).facts.grid_params) kv.insert({{"grid_h", "2"}, {"grid_w", "3"}});
  pc.params = PositionParams(kv);
  pc.channels = find_position_variant(type).facts.position_channels;  // ast reads its tree from a data channel
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

// Logits of a one-layer model with this encoding (fixed seed, fixed tokens): what the
// encoding's parameter values change, parameter-free encodings (rope's base) included.
std::vector<float> model_logits(const std::string& type, std::map<std::string, std::string> kv) {
  const PositionVariant& v = find_position_variant(type);
  ModelConfig mc;
  mc.kind = v.causal_capable ? ModelKind::Decoder : ModelKind::Encoder;
  mc.vocab = 11;
  mc.d_model = 16;
  mc.n_heads = 2;
  mc.n_layers = 1;
  mc.d_ff = 32;
  mc.max_len = 64;
  mc.position = type;
  mc.position_params = sized(type, std::move(kv)).params;
  mc.position_channels = v.facts.position_channels;  // cpe: row, col of a 2x3 grid; ast: a tree (below)
  Model m(mc, 7);
  const Tensor tokens = Tensor::from_vector(std::vector<int64_t>{1, 5, 2, 9, 3, 7}, {1, 6});
  Tensor index;  // graph_spd: shortest-path distances of a 6-node path graph
  if (!v.facts.index_task.empty()) {
    std::vector<int64_t> d;
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 6; ++j) d.push_back(i > j ? i - j : j - i);
    index = Tensor::from_vector(d, {1, 6, 6});
  }
  Tensor positions;  // the 6 tokens as a 2x3 grid (row, col) and as x = f ( a ) (parent: tokens back, 0 = a root)
  if (!mc.position_channels.empty()) {
    const std::vector<int64_t> parent = {0, 1, 2, 1, 1, 2};
    std::vector<int64_t> p;
    for (int64_t t = 0; t < 6; ++t)
      for (const std::string& name : mc.position_channels)
        p.push_back(name == "row" ? t / 3 : name == "col" ? t % 3 : parent[size_t(t)]);
    positions = Tensor::from_vector(p, {1, 6, int64_t(mc.position_channels.size())});
  }
  return m.forward(tokens, Tensor(), nullptr, nullptr, index, positions).data().contiguous().to_vector<float>();
}

}  // namespace

TEST_CASE("position params: every encoding accepts exactly the parameters its schema declares", "[nn][docs]") {
  for (const auto& v : position_variants()) {
    INFO("position " << v.name);
    std::set<std::string> declared;
    for (const auto& p : v.params) {
      REQUIRE(!p.type_name().empty());
      REQUIRE(!p.default_text().empty());
      REQUIRE(!p.doc.empty());
      REQUIRE((p.default_value.empty() != p.computed.empty()));  // a literal or a computed default, not both
      REQUIRE(declared.insert(p.name).second);
    }
    REQUIRE(declared == accepted_keys(v.name));
  }
}

TEST_CASE("position params: a literal default is what the encoding uses when the key is absent", "[nn][docs]") {
  int checked = 0;
  for (const auto& v : position_variants())
    for (const auto& p : v.params) {
      if (p.default_value.empty()) continue;
      INFO("position " << v.name << " " << p.name << "=" << p.default_value);
      REQUIRE(model_logits(v.name, {{p.name, p.default_value}}) == model_logits(v.name, {}));
      ++checked;
    }
  CHECK(checked >= 30);
  // and the check can fail: a value other than the default changes the built parameters
  REQUIRE(model_logits("rope", {{"base", "500"}}) != model_logits("rope", {}));
}

TEST_CASE("position params: bad values are refused when bound, naming the key and the bound", "[nn][docs]") {
  Generator g(0);
  auto refused = [&](const std::string& type, std::map<std::string, std::string> kv, const std::string& msg) {
    INFO(type << " " << msg);
    REQUIRE_THROWS_WITH(make_position_encoding(sized(type, std::move(kv)), g), Catch::Contains(msg));
  };
  refused("t5", {{"num_buckets", "3x"}}, "position parameter 'num_buckets': '3x' is not an integer");
  refused("shaw", {{"k_max", "70000"}}, "position parameter 'k_max': 70000 is out of range (|value| <= 65536)");
  refused("dynamic_bias", {{"depth", "65"}}, "position parameter 'depth': 65 is out of range (|value| <= 64)");
  refused("rope", {{"base", "inf"}}, "position parameter 'base': 'inf' is not a finite number");
  refused("alibi", {{"learnable", "maybe"}}, "position parameter 'learnable': 'maybe' is not a boolean");
  refused("xpos", {{"style", "spiral"}}, "position parameter 'style': 'spiral' is not one of interleaved, half");
  refused("t5", {{"num_bucket", "8"}}, "position 't5': unknown parameter 'num_bucket' (did you mean 'num_buckets'?)");
  // a key the encoding does not read is still checked when bound (no error waits for a getter)
  refused("kerple_log", {{"r1_init", "x"}}, "position parameter 'r1_init': 'x' is not a number");
}

TEST_CASE("position params: a getter for an undeclared key or a computed default is a programming error", "[nn]") {
  static const ParamSchema schema = {param::integer("rows", "4", "rows").rows(),
                                     param::integer("width", Computed{"d_model / 4"}, "width")};
  const PositionParams p = PositionParams().bind(schema, "position 'test'");
  REQUIRE(p.get_int("rows") == 4);
  REQUIRE(p.get_int("width", 9) == 9);
  REQUIRE_THROWS_WITH(p.get_int("width"), Catch::Contains("no literal default"));
  REQUIRE_THROWS_WITH(p.get_int("depth", 1), Catch::Contains("not declared in its schema"));
  REQUIRE_THROWS_WITH(PositionParams().get_int("rows"), Catch::Contains("before bind()"));
}

TEST_CASE("position params: docs/config.md holds the table of `relpos list --params --markdown`", "[nn][docs]") {
  std::ifstream f(std::string(RELPOS_SOURCE_DIR) + "/docs/config.md");
  REQUIRE(f.good());
  std::string doc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::string begin = "<!-- begin: relpos list --params --markdown -->\n",
                    end = "<!-- end: relpos list --params -->";
  auto b = doc.find(begin), e = doc.find(end);
  REQUIRE(b != std::string::npos);
  REQUIRE(e != std::string::npos);
  const std::string in_doc = doc.substr(b + begin.size(), e - b - begin.size());
  INFO("regenerate: relpos list --params --markdown, paste between the markers in docs/config.md");
  REQUIRE(in_doc == position_params_markdown());
}
