// The up-front memory estimate: O(L) attention for configs the fused kernel serves, O(L^2)
// where the scores are materialised (reference path, dense content terms, softcap, cuda).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "trainers/config.h"
#include "trainers/limits.h"
#include "nn/models.h"
#include "nn/positional/registry.h"

#include <chrono>

using namespace relpos::train;

namespace {

constexpr int64_t MiB = int64_t(1) << 20, GiB = int64_t(1) << 30;

// The attention term of a decoder (d_model 128, 4 heads, 2 layers, batch 1) at seq_len L.
int64_t attention_bytes(const std::string& position, int64_t L, const std::vector<std::string>& extra = {}) {
  const std::string yaml = "model: {kind: decoder, d_model: 128, n_heads: 4, n_layers: 2, max_len: " +
                           std::to_string(L) + ", position: {type: " + position +
                           "}}\ndata: {task: text, path: data/tinyshakespeare.txt, seq_len: " + std::to_string(L) +
                           ", batch_size: 1}\ntrain: {threads: 2}\n";
  const Config cfg = parse_config(yaml, "estimate.yaml", extra);
  const ResourceEstimate e = estimate_resources(cfg, 65);
  int64_t bytes = -1;
  for (const auto& t : e.terms)
    if (t.what.rfind("attention", 0) == 0) bytes = t.bytes;
  REQUIRE(bytes >= 0);
  return bytes;
}

}  // namespace

TEST_CASE("memory estimate: the fused path is O(L), the materialised one O(L^2)", "[trainers][memory]") {
  // B H L^2 floats = 1 GiB at L = 8192 (B 1, H 4): the reference path keeps several per layer.
  for (const char* pos : {"t5", "alibi", "rope", "none", "shaw"}) {  // shaw: bucketed terms, O(L k_max)
    INFO(pos);
    CHECK(attention_bytes(pos, 8192) < 64 * MiB);
    CHECK(attention_bytes(pos, 8192, {"model.attention=reference"}) >= 8 * GiB);
    CHECK(attention_bytes(pos, 8192, {"model.dropout=0.1"}) < 64 * MiB);        // dropout is drawn in the kernel
    CHECK(attention_bytes(pos, 8192, {"model.attn_softcap=30"}) >= 8 * GiB);    // softcap: materialised
  }
  for (const char* pos : {"transformer_xl", "deberta", "fire", "cope"}) {
    INFO(pos);
    CHECK(attention_bytes(pos, 8192) >= 8 * GiB);  // dense content terms / query-normalised bias: materialised
  }
  // linear in L on the fused path (equal increments per 4096 positions, over a constant
  // per-thread tile workspace), quadratic otherwise
  const int64_t f4 = attention_bytes("t5", 4096), f8 = attention_bytes("t5", 8192), f12 = attention_bytes("t5", 12288);
  CHECK(f8 - f4 == f12 - f8);
  CHECK(f8 - f4 > 0);
  CHECK(attention_bytes("t5", 4096, {"train.threads=1"}) < f4);  // the workspace is per thread
  const double ref_ratio = double(attention_bytes("t5", 8192, {"model.attention=reference"})) /
                           double(attention_bytes("t5", 4096, {"model.attention=reference"}));
  CHECK(ref_ratio == Approx(4.0).epsilon(0.01));
}

namespace {

// Parameters of a real model built from `cfg` (the tables at their full size).
int64_t real_parameters(Config cfg) {
  cfg.model.vocab = 16;
  relpos::nn::Model m(cfg.model, 0);
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace

TEST_CASE("memory estimate: position parameters at any max_len, without building tables that size",
          "[trainers][memory]") {
  // The estimate counts position parameters from two small builds (affine in max_len); the
  // growth from max_len 200 to 300 must be the real model's, for every registered encoding.
  for (const auto& v : relpos::nn::position_variants()) {
    INFO(v.name);
    std::string data = "{task: text, path: data/tinyshakespeare.txt, seq_len: 32, batch_size: 1}";
    std::string kind = "decoder", params;
    if (v.facts.index_task == "graph") data = "{task: graph, seq_len: 8, batch_size: 1}", kind = "encoder";
    if (v.facts.position_channels == std::vector<std::string>{"parent"})  // ast: a tree from the data
      data = "{task: tokens, path: data/python_ast_train.rptok, val_path: data/python_ast_val.rptok, "
             "position_channels: [parent], seq_len: 32, batch_size: 1}";
    if (v.facts.grid_params)
      data = "{task: patch_grid, grid_h: 3, grid_w: 4, batch_size: 1}", kind = "encoder", params = ", grid_h: 3, grid_w: 4";
    if (v.facts.position_channels == std::vector<std::string>{"row", "col"})  // cpe: the digits' row/col grid
      data = "{task: token_labels, path: data/digits_train.rptok, val_path: data/digits_val.rptok, "
             "position_channels: [row, col], seq_len: 64, batch_size: 1}",
      kind = "encoder";
    auto cfg_at = [&](int64_t max_len) {
      return parse_config("model: {kind: " + kind + ", d_model: 16, n_heads: 2, n_layers: 2, max_len: " +
                              std::to_string(max_len) + ", position: {type: " + v.name + params + "}}\ndata: " + data +
                              "\n",
                          "estimate.yaml");
    };
    const Config a = cfg_at(200), b = cfg_at(300);
    const int64_t est = estimate_resources(b, 16).parameters - estimate_resources(a, 16).parameters;
    CHECK(est == real_parameters(b) - real_parameters(a));
  }
  // ... and a learned table of 2^24 x 64 is estimated (1.07e9 parameters) and refused by the
  // memory check, not allocated: validation and the estimate take well under a second.
  const auto t0 = std::chrono::steady_clock::now();
  const Config big = parse_config("model: {d_model: 64, n_heads: 2, max_len: 16777216, position: {type: learned}}\n",
                                  "big.yaml");
  const ResourceEstimate e = estimate_resources(big, 65);
  CHECK(e.parameters > (int64_t(1) << 30));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}
