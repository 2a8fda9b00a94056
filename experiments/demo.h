// experiments/demo.h — small self-contained training jobs, independent of the YAML trainer
// (`relpos demo` and the tests):
//  * a character-level MLP language model on a text file (the README's main job), and
//  * a 2-layer MLP regression on a synthetic problem (used by the test suite).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace relpos::demo {

struct CharMlpConfig {
  std::string data_path = "data/tinyshakespeare.txt";
  int64_t context = 8;       // characters of context
  int64_t embed = 24;        // embedding size per character
  int64_t hidden = 256;      // hidden units
  int64_t batch = 128;
  int64_t steps = 3000;
  double lr = 0.1;           // SGD, cosine-decayed to 10% of lr
  double momentum = 0.9;
  double val_fraction = 0.1;  // last 10% of the text
  int64_t eval_every = 500;
  int64_t eval_batches = 20;
  uint64_t seed = 1337;
  int64_t sample_chars = 200;
};

struct CharMlpResult {
  double unigram_val_loss = 0;  // baseline: cross-entropy of the train-set character frequencies
  double final_train_loss = 0;  // mean over the last eval_every steps
  double final_val_loss = 0;
  std::vector<double> losses;   // every step
  std::string sample;
  double seconds = 0;
};

// Logs progress lines through `log` (may be empty).
CharMlpResult train_char_mlp(const CharMlpConfig& cfg, const std::function<void(const std::string&)>& log);

struct RegressionResult {
  std::vector<double> losses;  // MSE per step
  double final_mse = 0;
};

// y = sin(2 x0) + x1^2 - 0.5 x0 x1 on 256 points in [-1, 1]^2; MLP 2 -> hidden -> 1 with tanh,
// full-batch SGD with momentum.
RegressionResult train_mlp_regression(uint64_t seed, int64_t steps, int64_t hidden = 32,
                                      double lr = 0.05, double momentum = 0.9);

}  // namespace relpos::demo
