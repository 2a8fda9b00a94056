// tests/nn/test_position_cache.cpp — the geometry cache of the position encodings
// (PositionEncoding::geometry_cached): what an instance computes from its cache equals what a
// fresh instance builds, for every registered encoding, and changing a setting (RoPE's
// eval-time scaling) replaces the cached tables.
#include <catch2/catch.hpp>
#include <tuple>

#include "../helpers.h"
#include "nn/positional/registry.h"

using namespace relpos;

namespace {

// Everything the encoding contributes for geometry g, computed by `pos`.
std::vector<double> contribution(const nn::PositionEncoding& pos, const nn::AttnGeometry& g, int64_t head_dim) {
  std::vector<double> out;
  auto add = [&](const Variable& v) {
    if (!v.defined()) return;
    auto x = v.data().contiguous().to_vector<double>();
    out.insert(out.end(), x.begin(), x.end());
  };
  Variable q = test::rand_var({1, 2, g.Lq, head_dim}, 1, -1, 1, false);
  Variable k = test::rand_var({1, 2, g.Lk, head_dim}, 2, -1, 1, false);
  add(pos.toeplitz_bias(g));
  add(pos.score_bias(g));
  add(pos.score_terms(q, k, g));
  add(pos.rotate(q, g.q_offset));
  add(pos.rotate_key(k, g.k_offset));
  add(pos.embed(test::rand_var({1, g.Lq, 2 * head_dim}, 3, -1, 1, false), g.q_offset));
  return out;
}

}  // namespace

TEST_CASE("position encodings: cached geometry tables equal freshly built ones", "[positional]") {
  // Two instances with the same seed: one sees many geometries (cache filled and reused), the
  // other is fresh for every comparison. The index encodings (a patch grid, a graph) are
  // encoders over their own structure, not over these geometries.
  int checked = 0;
  for (const auto& v : nn::position_variants()) {
    if (!v.causal_capable || !v.facts.position_channels.empty()) continue;  // ast: a tree from the data, not these
    nn::PositionConfig cfg;
    cfg.type = v.name;
    cfg.d_model = 16;
    cfg.n_heads = 2;
    cfg.head_dim = 8;
    cfg.max_len = 64;
    cfg.dtype = DType::F64;
    cfg.params = nn::PositionParams(v.facts.gradcheck_params);
    Generator g1(9);
    auto warm = nn::make_position_encoding(cfg, g1);
    for (int rep = 0; rep < 2; ++rep)
      for (auto [Lq, Lk, qo, ko] :
           {std::tuple<int64_t, int64_t, int64_t, int64_t>{4, 4, 0, 0}, {1, 5, 4, 0}, {3, 6, 3, 0}, {4, 4, 0, 0}}) {
        nn::AttnGeometry geo{Lq, Lk, qo, ko, true, Tensor()};
        geo.q_proj = geo.k_proj = [](const Variable& x) { return x; };  // a layer's projections (DeBERTa)
        Generator gf(9);
        auto fresh = nn::make_position_encoding(cfg, gf);
        INFO(v.name << " Lq " << Lq << " Lk " << Lk << " rep " << rep);
        CHECK(contribution(*warm, geo, 8) == contribution(*fresh, geo, 8));
      }
    ++checked;
  }
  CHECK(checked >= 16);
}

TEST_CASE("rope: eval-time scaling replaces the cached cos/sin tables", "[positional]") {
  nn::PositionConfig cfg;
  cfg.type = "rope";
  cfg.d_model = 16;
  cfg.n_heads = 2;
  cfg.head_dim = 8;
  cfg.max_len = 64;
  cfg.dtype = DType::F64;
  Generator g(1);
  auto rope = nn::make_position_encoding(cfg, g);
  Variable x = test::rand_var({1, 2, 6, 8}, 3, -1, 1, false);
  Tensor before = rope->rotate(x, 10).data();
  nn::PositionParams p;
  p.set("scaling", "linear");
  p.set("factor", "4");
  rope->set_eval_scaling(p);
  Tensor after = rope->rotate(x, 10).data();
  // linear scaling by 4: position 10 now rotates like position 2.5 did; compare with a fresh
  // instance built with that scaling
  nn::PositionConfig scaled = cfg;
  scaled.params.set("scaling", "linear");
  scaled.params.set("factor", "4");
  Generator g2(1);
  auto ref = nn::make_position_encoding(scaled, g2);
  CHECK(after.to_vector<double>() == ref->rotate(x, 10).data().to_vector<double>());
  CHECK(after.to_vector<double>() != before.to_vector<double>());
}
