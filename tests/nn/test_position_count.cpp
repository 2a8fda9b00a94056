// nn::position_parameter_count counts an encoding's parameters from builds at small sizes
// (a polynomial in n_heads, head_dim and max_len); config validation and the memory estimate
// use it so that they never allocate the tables a config claims. These cases hold it to the
// real builds of every registered encoding, at sizes where each axis is interpolated.
#include <catch2/catch.hpp>
#include <chrono>

#include "nn/positional/registry.h"
#include "trainers/config.h"
#include "trainers/limits.h"

using namespace relpos;

namespace {

nn::PositionConfig position_at(const nn::PositionVariant& v, int64_t heads, int64_t head_dim, int64_t max_len,
                               bool shared) {
  nn::PositionConfig pc;
  pc.type = v.name;
  pc.n_heads = heads;
  pc.head_dim = head_dim;
  pc.d_model = heads * head_dim;
  pc.max_len = max_len;
  pc.params = nn::PositionParams(v.facts.gradcheck_params);  // relative_2d needs its grid
  pc.channels = v.facts.position_channels;                       // ast reads its tree from a data channel
  pc.shared_across_layers = shared;
  return pc;
}

int64_t built_count(const nn::PositionConfig& pc) {
  Generator g(0);
  int64_t n = 0;
  for (const Variable& p : nn::make_position_encoding(pc, g)->parameters()) n += p.numel();
  return n;
}

}  // namespace

TEST_CASE("position parameter count: equal to the real build of every encoding", "[registry][memory]") {
  struct Sizes {
    int64_t heads, head_dim, max_len;
  };
  // small (built directly), then each axis past its interpolation points (n_heads and head_dim
  // >= 17, max_len >= 73), every residue mod 4
  const Sizes sizes[] = {{2, 4, 16},    {20, 17, 130}, {17, 18, 301}, {19, 20, 68},
                         {3, 11, 1000}, {18, 21, 77},  {17, 19, 90},  {20, 20, 76}};
  for (const auto& v : nn::position_variants())
    for (const Sizes& s : sizes)
      for (bool shared : {false, true}) {
        const nn::PositionConfig pc = position_at(v, s.heads, s.head_dim, s.max_len, shared);
        INFO(v.name << " n_heads " << s.heads << " head_dim " << s.head_dim << " max_len " << s.max_len
                    << (shared ? " shared" : " per layer"));
        int64_t real = -1;
        try {
          real = built_count(pc);
        } catch (const Error&) {  // sizes the encoding refuses (transformer_xl: an odd d_model)
          CHECK_THROWS_AS(nn::position_parameter_count(pc), Error);
          continue;
        }
        const std::optional<int64_t> n = nn::position_parameter_count(pc);
        REQUIRE(n.has_value());
        CHECK(*n == real);
      }
}

TEST_CASE("position parameter count: a size check the small builds fail falls back to the real one",
          "[registry][memory]") {
  // rope with fraction 0.25: head_dim 2 leaves no rotary pair, head_dim 64 has 8
  nn::PositionConfig pc;
  pc.type = "rope";
  pc.n_heads = 4, pc.head_dim = 64, pc.d_model = 256, pc.max_len = 512;
  pc.params.set("fraction", "0.25");
  CHECK(nn::position_parameter_count(pc) == std::optional<int64_t>(0));
  Generator g(0);
  CHECK(nn::make_position_probe(pc, g)->type() == "rope");
  pc.head_dim = 2, pc.n_heads = 128;  // and the real error where the real sizes fail it
  CHECK_THROWS_WITH(nn::position_parameter_count(pc), Catch::Contains("leaves no rotary pair"));
}

TEST_CASE("position parameter count: validation at the largest d_model allocates no d_model^2 table",
          "[registry][memory][hostile]") {
  // Transformer-XL's W_r at d_model 65,536 would be 2^32 floats (17 GB): validation counts it
  // and refuses the config on memory in well under a second instead.
  const auto t0 = std::chrono::steady_clock::now();
  const train::Config c = train::parse_config(
      "model: {d_model: 65536, n_heads: 2, n_layers: 1, position: {type: transformer_xl}}\n", "txl.yaml");
  const train::ResourceEstimate e = train::estimate_resources(c, 65);
  CHECK(e.parameters > (int64_t(1) << 32));
  CHECK_THROWS_WITH(train::check_memory(e, false, "validate"), Catch::Contains("memory"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}
