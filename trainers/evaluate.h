// trainers/evaluate.h — length-extrapolation evaluation behind `relpos eval`: the loss per
// position in the window, grouped into position buckets, and the loss on positions at or
// beyond the training length only. Three protocols, named in every result:
//   random   cfg.train.eval_batches validation batches of random windows (Dataset::val_batch);
//            works for every task (the protocol the trainer's val_loss uses)
//   windows  consecutive non-overlapping windows of L tokens over the validation stream; every
//            token is scored once, token t of a window sees t earlier tokens (Press et al.
//            2022, ALiBi, Tables 2-3 "nonoverlapping inference"); text tasks only
//   sliding  windows of L tokens advanced by `stride` S; the first window scores all its L
//            tokens, every later one only its last S, so each token is scored once with at least
//            L - S tokens of context (ALiBi Appendix B "sliding window evaluation"); text only
//   examples every validation example once, in order (datasets of labelled examples:
//            token_labels); accuracy is then the classification accuracy over the split
//   segments consecutive segments of L tokens on batch_size contiguous parts of the validation
//            stream, each attending to the detached Transformer-XL memory of its previous
//            segments (mem_len, default model.mem_len); every token scored once (text decoders
//            with a relative encoding)
// Positions are counted inside the window (0 .. L-1): the first scored token of a sliding
// window after the first sits at position L - S.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/models.h"
#include "trainers/config.h"
#include "trainers/data/data.h"

namespace relpos::train {

struct EvalOptions {
  int64_t seq_len = 0;          // window length L (0: the training length)
  std::string mode = "random";  // random | windows | sliding | segments | examples
  int64_t stride = 0;           // sliding: tokens scored per window after the first (0: L / 2)
  int64_t bucket = 0;           // width of the position buckets (0: the training length)
  int64_t max_tokens = 0;       // windows / sliding: score at most this many tokens
                                // (0: eval_batches * batch_size * train length, the random budget)
  int64_t mem_len = -1;         // segments: memory length (-1: the model's model.mem_len)
  // random: also score a subset of the targets alone, by a token channel of
  // data.position_channels that counts tokens back (the code domain's `parent`): the target at
  // window position t + 1 is in it when subset_min <= channel value <= t + 1 (what it points
  // to lies inside the window, at least subset_min tokens back). Empty: no subset.
  std::string subset_channel;
  int64_t subset_min = 8;
};

struct BucketLoss {
  int64_t lo = 0, hi = 0;  // positions [lo, hi)
  double loss = 0;         // mean over the scored tokens in the bucket (NaN if none)
  int64_t tokens = 0;
};

struct PositionEval {
  std::string mode;
  int64_t seq_len = 0, stride = 0, train_len = 0, windows = 0;
  double loss = 0, perplexity = 0, accuracy = 0;
  int64_t tokens = 0;
  std::vector<BucketLoss> buckets;
  double beyond_loss = std::numeric_limits<double>::quiet_NaN();  // positions >= train_len
  int64_t beyond_tokens = 0;
  std::vector<double> position_loss;  // [L] mean loss at each window position (NaN: none scored)
  // EvalOptions::subset_channel: the subset's description, mean loss (NaN: none scored), size.
  std::string subset;
  double subset_loss = std::numeric_limits<double>::quiet_NaN();
  int64_t subset_tokens = 0;
};

// Per-position sums over the scored tokens of many batches.
struct PositionAccumulator {
  std::vector<double> loss_sum;   // [L]
  std::vector<int64_t> count;     // [L]
  std::vector<double> correct;    // [L] argmax == target
  // logits: [B, L, V]; target: int64 [B, L] with kIgnore where nothing is scored.
  void add(const Tensor& logits, const Tensor& target);
};

// One window of the validation stream: input tokens [start, start + L), targets shifted by
// one, scored from window position score_from on.
struct EvalWindow {
  int64_t start = 0, score_from = 0;
};
// The windows of `mode` (windows: stride = L) over a stream of n tokens (n - 1 targets),
// stopping once max_scored tokens are scored (0: no limit).
std::vector<EvalWindow> plan_windows(int64_t n_tokens, int64_t L, int64_t stride, int64_t max_scored);

// Mean loss per bucket of width `bucket`, the loss beyond train_len, and the totals.
PositionEval summarize(const PositionAccumulator& acc, int64_t bucket, int64_t train_len);

// The targets of `target` [B, L] in the subset of EvalOptions::subset_channel (the others
// kIgnore): positions int64 [B, L, P] are the channels of the input tokens, so the target at t
// (input token t + 1) reads row t + 1; the last target has no row and is left out.
Tensor subset_targets(const Tensor& target, const Tensor& positions, int64_t column, int64_t min_value);

PositionEval evaluate_positions(const nn::Model& model, const Dataset& data, const Config& cfg,
                                const EvalOptions& opt);

// A copy of a trained model with some position-encoding settings changed at evaluation time
// (RoPE scaling: {"scaling": "linear|ntk|yarn", "factor": "4"}). The encoding is rebuilt from
// the merged parameters and the trained weights are copied in; only settings without
// parameters may change (checked by load_state_dict).
std::unique_ptr<nn::Model> with_position_settings(const nn::Model& model, Config& cfg,
                                                  const std::map<std::string, std::string>& settings);

}  // namespace relpos::train
