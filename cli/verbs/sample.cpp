// relpos sample RUN_DIR [--prompt T] [--tokens N] [--temperature T] [--seed S] [--precision P]
// Generates from a trained decoder with the KV cache.
#include <fmt/format.h>

#include <charconv>

#include "cli/command.h"
#include "trainers/limits.h"
#include "trainers/trainer.h"

namespace relpos::cli {
namespace {

struct Args {
  std::string dir;
  train::SampleOptions opt;
  std::string precision;
};

// A uint64 option of CLI11 clamps an out-of-range value: a seed the user did not give.
std::string uint64_text(const std::string& text) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) return fmt::format("'{}' is larger than 2^64 - 1", text);
  if (ec != std::errc() || end != text.data() + text.size())
    return fmt::format("'{}': expected an integer 0 .. 18446744073709551615", text);
  return {};
}

Action setup(CLI::App& cmd) {
  auto a = std::make_shared<Args>();
  cmd.add_option("run_dir", a->dir, "run directory or checkpoint directory")->required();
  cmd.add_option("--prompt", a->opt.prompt, "text to continue");
  cmd.add_option("--tokens", a->opt.tokens, "tokens to generate")
      ->check(CLI::Range(int64_t(1), train::kMaxSampleTokens))
      ->capture_default_str();
  cmd.add_option("--temperature", a->opt.temperature, "sampling temperature (0 = greedy)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--seed", a->opt.seed, "sampling seed (0 .. 2^64 - 1)")->check(uint64_text)->capture_default_str();
  add_precision_option(cmd, a->precision);
  return [a](Context&) {
    const train::LoadedRun run = train::load_run(a->dir);
    AutocastGuard autocast(precision_or(a->precision, run.cfg.train.precision));
    fmt::print("{}\n", train::sample(run, a->opt));
    return 0;
  };
}

}  // namespace

Command sample_command() {
  return {"sample", "generate from a trained decoder (KV cache)", setup};
}

}  // namespace relpos::cli
