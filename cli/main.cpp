// cli/main.cpp — the relpos executable. Subcommands:
//   relpos demo [--steps N] [--data PATH] [--seed S] [--threads T]   train the char-MLP demo
//   relpos info                                                        build and device facts
// Exit codes: 0 ok, 2 usage error, 1 runtime failure.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "kernels/ops.h"
#include "trainers/demo.h"

int main(int argc, char** argv) {
  CLI::App app{"relpos — train small transformers with relative position encodings"};
  app.require_subcommand(1);

  relpos::demo::CharMlpConfig demo;
  int threads = 0;
  auto* demo_cmd = app.add_subcommand("demo", "train a character-level MLP language model on a text file");
  demo_cmd->add_option("--data", demo.data_path, "UTF-8/byte text file")->capture_default_str();
  demo_cmd->add_option("--steps", demo.steps, "training steps")->check(CLI::PositiveNumber)->capture_default_str();
  demo_cmd->add_option("--batch", demo.batch, "batch size")->check(CLI::PositiveNumber)->capture_default_str();
  demo_cmd->add_option("--lr", demo.lr, "peak SGD learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  demo_cmd->add_option("--seed", demo.seed, "random seed")->capture_default_str();
  demo_cmd->add_option("--eval-every", demo.eval_every, "steps between evaluations")->check(CLI::PositiveNumber)->capture_default_str();
  demo_cmd->add_option("--threads", threads, "CPU threads (default: OMP_NUM_THREADS or all cores)")->check(CLI::NonNegativeNumber);

  auto* info_cmd = app.add_subcommand("info", "print build and device information");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (threads > 0) relpos::k::set_num_threads(threads);
    if (*info_cmd) {
      fmt::print("relpos 0.1.0\nthreads: {}\ncuda: {}\ncuda devices: {}\n", relpos::k::num_threads(),
                 relpos::cuda::built_with_cuda() ? "built" : "not built", relpos::cuda::device_count());
      return 0;
    }
    if (*demo_cmd) {
      auto r = relpos::demo::train_char_mlp(demo, [](const std::string& s) {
        fmt::print("{}\n", s);
        std::fflush(stdout);
      });
      fmt::print("unigram baseline val loss {:.4f}; final val loss {:.4f} ({:.1f} s)\n", r.unigram_val_loss,
                 r.final_val_loss, r.seconds);
      fmt::print("sample:\n{}\n", r.sample);
      return 0;
    }
  } catch (const relpos::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "internal error: {}\n", e.what());
    return 1;
  }
  return 0;
}
