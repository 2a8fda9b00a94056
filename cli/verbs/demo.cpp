// relpos demo [--data PATH] [--steps N] [--batch B] [--lr LR] [--seed S] [--eval-every N]
// The character-level MLP language model (experiments/demo.h).
#include "experiments/demo.h"

#include <fmt/format.h>

#include <cstdio>

#include "cli/command.h"

namespace relpos::cli {
namespace {

Action setup(CLI::App& cmd) {
  auto d = std::make_shared<demo::CharMlpConfig>();
  cmd.add_option("--data", d->data_path, "UTF-8/byte text file")->capture_default_str();
  cmd.add_option("--steps", d->steps, "training steps")->check(CLI::PositiveNumber)->capture_default_str();
  cmd.add_option("--batch", d->batch, "batch size")->check(CLI::PositiveNumber)->capture_default_str();
  cmd.add_option("--lr", d->lr, "peak SGD learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  cmd.add_option("--seed", d->seed, "random seed")->capture_default_str();
  cmd.add_option("--eval-every", d->eval_every, "steps between evaluations")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  return [d](Context&) {
    const auto r = demo::train_char_mlp(*d, [](const std::string& s) {
      fmt::print("{}\n", s);
      std::fflush(stdout);
    });
    fmt::print("unigram baseline val loss {:.4f}; final val loss {:.4f} ({:.1f} s)\n", r.unigram_val_loss,
               r.final_val_loss, r.seconds);
    fmt::print("sample:\n{}\n", r.sample);
    return 0;
  };
}

}  // namespace

Command demo_command() {
  return {"demo", "train a character-level MLP language model on a text file", setup};
}

}  // namespace relpos::cli
