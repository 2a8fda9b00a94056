// relpos eval RUN_DIR [--seq-len N ...] [--mode random|windows|sliding|segments|examples] [--stride S]
//                     [--val-path FILE]
//                     [--bucket W] [--rope-scaling linear|ntk|yarn --rope-factor F] [--json]
// The loss per length, per position bucket and beyond the training length.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "nn/positional/registry.h"
#include "trainers/evaluate.h"
#include "trainers/limits.h"
#include "trainers/trainer.h"

namespace relpos::cli {
namespace {

struct Args {
  std::string dir;
  std::vector<int64_t> lens;
  bool json = false, ignore_memory = false;
  train::EvalOptions opt;
  std::string rope_scaling;
  double rope_factor = 0;
  std::string precision;
  std::string val_path;
};

std::string fmt_loss(double v) {
  return std::isfinite(v) ? fmt::format("{:.4f}", v) : std::string("-");
}
nlohmann::json json_num(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

nlohmann::json eval_json(const train::PositionEval& e, int64_t L, int64_t step, const std::string& note) {
  nlohmann::json bj = nlohmann::json::array();
  for (auto& b : e.buckets)
    bj.push_back({{"lo", b.lo}, {"hi", b.hi}, {"loss", json_num(b.loss)}, {"tokens", b.tokens}});
  nlohmann::json row = {{"seq_len", L},
                        {"mode", e.mode},
                        {"loss", e.loss},
                        {"perplexity", e.perplexity},
                        {"accuracy", e.accuracy},
                        {"tokens", e.tokens},
                        {"windows", e.windows},
                        {"train_len", e.train_len},
                        {"beyond_loss", json_num(e.beyond_loss)},
                        {"beyond_tokens", e.beyond_tokens},
                        {"buckets", bj},
                        {"step", step}};
  if (!e.subset.empty()) {
    row["subset"] = e.subset;
    row["subset_loss"] = json_num(e.subset_loss);
    row["subset_tokens"] = e.subset_tokens;
  }
  if (e.mode == "sliding") row["stride"] = e.stride;
  if (e.mode == "segments") row["mem_len"] = e.stride;
  if (!note.empty()) row["position_setting"] = note;
  return row;
}

void print_text(const train::PositionEval& e, int64_t L, int64_t step, const std::string& note) {
  const std::string mode = e.mode == "random"    ? fmt::format("random windows ({} sequences)", e.windows)
                           : e.mode == "examples" ? fmt::format("every validation example ({})", e.windows)
                           : e.mode == "windows" ? fmt::format("non-overlapping windows ({} windows)", e.windows)
                           : e.mode == "segments"
                               ? fmt::format("segments with memory {} ({} batches)", e.stride, e.windows)
                               : fmt::format("sliding window, stride {} ({} windows)", e.stride, e.windows);
  fmt::print("seq_len {:>5}, mode {}{}: loss {:.4f}  perplexity {:.3f}  accuracy {:.4f}  ({} tokens, step {})\n", L,
             mode, note.empty() ? "" : ", " + note, e.loss, e.perplexity, e.accuracy, e.tokens, step);
  for (auto& b : e.buckets)
    fmt::print("    positions {:>5}-{:<5}  loss {:>8}  ({} tokens)\n", b.lo, b.hi - 1, fmt_loss(b.loss), b.tokens);
  fmt::print("    positions >= {} (beyond the training length): loss {}  ({} tokens)\n", e.train_len,
             fmt_loss(e.beyond_loss), e.beyond_tokens);
  if (!e.subset.empty())
    fmt::print("    subset, {}: loss {}  ({} tokens)\n", e.subset, fmt_loss(e.subset_loss), e.subset_tokens);
}

// The values of the encodings' `scaling` parameter (RoPE's schema declares them).
std::vector<std::string> scaling_choices() {
  for (const auto& v : nn::position_variants())
    if (const nn::ParamSpec* p = v.param("scaling")) return p->choices;
  return {};
}

// RoPE context scaling at evaluation time (--rope-scaling, --rope-factor): the run's model with
// those position settings; returns the note printed beside each result.
std::string apply_rope_scaling(train::LoadedRun& run, const Args& a) {
  if (!run.cfg.model.position->param("scaling"))
    throw UsageError(
        fmt::format("--rope-scaling: this run uses position encoding '{}', which has no 'scaling' "
                    "parameter (rope has)",
                    run.cfg.model.position));
  std::map<std::string, std::string> st{{"scaling", a.rope_scaling}};
  if (a.rope_factor > 0) st["factor"] = fmt::format("{}", a.rope_factor);
  run.model = train::with_position_settings(*run.model, run.cfg, st);
  return fmt::format("rope scaling {} factor {}", a.rope_scaling,
                     run.cfg.model.position_params.get_double("factor", 1.0));
}

int run(Args a) {
  train::LoadedRun run = train::load_run(a.dir, a.val_path);
  if (a.lens.empty()) a.lens.push_back(run.cfg.data.seq_len);
  for (int64_t L : a.lens)
    train::check_memory(train::estimate_resources(run.cfg, run.data->vocab_size(), L), a.ignore_memory,
                        fmt::format("eval --seq-len {}", L));
  const std::string note = a.rope_scaling.empty() ? std::string() : apply_rope_scaling(run, a);
  nlohmann::json j = nlohmann::json::array();
  AutocastGuard autocast(precision_or(a.precision, run.cfg.train.precision));
  for (int64_t L : a.lens) {
    train::EvalOptions o = a.opt;
    o.seq_len = L;
    const train::PositionEval e = train::evaluate_positions(*run.model, *run.data, run.cfg, o);
    // A non-finite loss is a failure, never a result.
    if (!std::isfinite(e.loss))
      throw Error(fmt::format("eval {}: the loss at seq_len {} is {} (the model's outputs are not finite)",
                              run.checkpoint, L, e.loss));
    if (a.json)
      j.push_back(eval_json(e, L, run.step, note));
    else
      print_text(e, L, run.step, note);
  }
  if (a.json) fmt::print("{}\n", j.dump());
  return 0;
}

// CLI11's PositiveNumber accepts "nan" (as 1): a number the user did not give.
std::string finite_positive(const std::string& text) {
  double v = 0;
  try {
    size_t used = 0;
    v = std::stod(text, &used);
    if (used != text.size()) return fmt::format("'{}' is not a number", text);
  } catch (const std::exception&) {
    return fmt::format("'{}' is not a number", text);
  }
  return std::isfinite(v) && v > 0 ? std::string() : fmt::format("'{}': expected a finite number > 0", text);
}

Action setup(CLI::App& cmd) {
  auto a = std::make_shared<Args>();
  cmd.add_option("run_dir", a->dir, "run directory or checkpoint directory")->required();
  cmd.add_option("--seq-len", a->lens, "evaluate at these sequence lengths (default: the training length)")
      ->check(CLI::Range(int64_t(1), train::kMaxLen));
  cmd.add_option("--mode", a->opt.mode,
                 "random: eval_batches random windows; windows: consecutive non-overlapping windows; sliding: "
                 "windows advanced by --stride, scoring only the last stride tokens (text decoders); examples: "
                 "every validation example once (token_labels)")
      ->check(CLI::IsMember({"random", "windows", "sliding", "segments", "examples"}))
      ->capture_default_str();
  cmd.add_option("--mem-len", a->opt.mem_len,
                 "segments: Transformer-XL memory length (default: the run's model.mem_len)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--stride", a->opt.stride, "sliding: tokens scored per window (default seq_len / 2)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--bucket", a->opt.bucket, "position bucket width (default: the training length)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--max-tokens", a->opt.max_tokens,
                 "windows/sliding: score at most N tokens (default eval_batches x batch_size x train length)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--subset-channel", a->opt.subset_channel,
                 "random: also score the targets whose channel (of data.position_channels, counting tokens back) "
                 "is >= --subset-min and inside the window, e.g. parent");
  cmd.add_option("--subset-min", a->opt.subset_min, "the smallest channel value in the subset")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  auto* rs = cmd.add_option("--rope-scaling", a->rope_scaling, "RoPE runs: context scaling at evaluation time")
                 ->check(CLI::IsMember(scaling_choices()));
  cmd.add_option("--rope-factor", a->rope_factor, "RoPE scaling factor (e.g. eval length / train length)")
      ->check(finite_positive)
      ->needs(rs);
  cmd.add_option("--val-path", a->val_path,
                 "evaluate on this validation token file instead of the run's data.val_path (same vocabulary; "
                 "e.g. the digits upsampled to 12x12)");
  add_precision_option(cmd, a->precision);
  cmd.add_flag("--ignore-memory-check", a->ignore_memory,
               "evaluate even when the memory estimate exceeds the available memory (MemAvailable, cgroup limits)");
  cmd.add_flag("--json", a->json, "print JSON");
  return [a](Context&) { return run(*a); };
}

}  // namespace

Command eval_command() {
  return {"eval", "evaluate a trained run on its validation data", setup};
}

}  // namespace relpos::cli
