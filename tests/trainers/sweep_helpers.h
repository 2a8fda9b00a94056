// Shared by the sweep tests (test_sweep.cpp, test_sweep_shard.cpp): the tiny 4-point spec
// both run and a reader for JSONL index files.
#pragma once
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace relpos::test {

// grid {alibi, t5} x recipes {base, zl}, 6 steps each, checkpoints every 3, evaluated at 5
// and 10 (the spec's `dir:` is left to the caller).
inline constexpr const char* kTinySweepSpec = R"(config:
  model: {d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32, max_len: 64}
  data: {task: copy, vocab_size: 6, seq_len: 5, min_len: 2, batch_size: 4}
  optim: {lr: 3.0e-3, warmup: 0}
  train: {steps: 6, eval_every: 3, eval_batches: 2, log_every: 3, threads: 1}
grid:
  model.position.type: [alibi, t5]
points:
  - {name: base}
  - {name: zl, set: {optim.z_loss: 1.0e-3}}
checkpoint_every: 3
eval: {lengths: [5, 10], mode: random}
)";

// One parsed JSON value per non-empty line.
inline std::vector<nlohmann::json> json_lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream f(path);
  for (std::string l; std::getline(f, l);)
    if (!l.empty()) out.push_back(nlohmann::json::parse(l));
  return out;
}

}  // namespace relpos::test
