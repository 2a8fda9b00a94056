// relpos train CONFIG [--set k=v ...] [--resume DIR] [--overwrite] [--ignore-memory-check]
// Trains from a YAML config (one rank of a data-parallel run when started by mpirun), prints
// the summary and, for a text decoder, a sample.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "cli/command.h"
#include "nn/positional/registry.h"
#include "trainers/config.h"
#include "trainers/evaluate.h"
#include "trainers/trainer.h"
#ifdef RELPOS_WITH_MPI
#include "trainers/dist/mpi/comm_mpi.h"
#endif

namespace relpos::cli {
namespace {

struct Args {
  std::string config, resume;
  std::vector<std::string> sets;
  bool overwrite = false, ignore_memory = false;
};

// The last line of a run: only what was measured (the last evaluation's step when it was not
// the last step).
void print_summary(const train::TrainResult& r) {
  const std::string val =
      r.final_val_step < 0 ? std::string("no evaluation ran")
      : r.final_val_step == r.steps_done
          ? fmt::format("val loss {:.4f}", r.final_val_loss)
          : fmt::format("val loss {:.4f} (step {}, the last evaluation)", r.final_val_loss, r.final_val_step);
  fmt::print("done: {} steps in {:.1f} s; final train loss {:.4f}, {}{}; run in {}\n", r.steps_done, r.seconds,
             r.final_train_loss, val, r.skipped_steps ? fmt::format(" ({} steps skipped)", r.skipped_steps) : "",
             r.run_dir);
}

// 200 characters from the trained decoder, prompted with a line break where the text has one,
// else its first character (a one-line text has no '\n').
void print_sample(const std::string& run_dir) {
  train::LoadedRun run = train::load_run(run_dir);
  train::SampleOptions so;
  const std::vector<std::string> vocab = run.data->vocabulary();
  so.prompt = std::find(vocab.begin(), vocab.end(), "\n") != vocab.end() || vocab.empty() ? "\n" : vocab.front();
  so.tokens = 200;
  so.temperature = 0.8;
  fmt::print("sample:\n{}\n", train::sample(run, so));
}

int run(const Args& a, Context& ctx) {
  // Started by mpirun (or srun with PMI): one rank of a data-parallel run.
  if (const int n = train::launcher_world_size(); n > 1) {
#ifdef RELPOS_WITH_MPI
    ctx.comm = train::make_mpi_communicator();
#else
    throw ConfigError(
        fmt::format("started by an MPI launcher with {} processes, but this relpos was built without MPI; install "
                    "libopenmpi-dev (scripts/install-deps.sh) and rebuild (CMake option RELPOS_MPI)",
                    n));
#endif
  }
  train::Config c = train::load_config(a.config, a.sets);
  train::TrainOptions to;
  to.comm = ctx.comm.get();
  if (!a.resume.empty()) to.resume = a.resume;
  to.overwrite = a.overwrite;
  to.ignore_memory_check = a.ignore_memory;
  to.progress_bar = isatty(fileno(stdout));
  to.log = [](const std::string& s) {
    fmt::print("{}", s);
    if (s.empty() || (s.back() != '\n' && s.front() != '\r')) fmt::print("\n");
    std::fflush(stdout);
  };
  const train::TrainResult r = train::train(c, to);
  if (ctx.comm && ctx.comm->rank() != 0) return 0;  // rank 0 reports and samples
  print_summary(r);
  // Generated tokens carry no data channels: an encoding that reads one (ast; a distance from a
  // channel) cannot sample.
  const std::string& distance = c.model.position_distance;
  const bool reads_data = !c.model.position->facts.position_channels.empty() || distance != "index";
  if (train::text_decoder(c) && !reads_data) print_sample(r.run_dir);
  if (train::text_decoder(c) && distance != "index")
    fmt::print("sample: none (model.position.distance '{}': generated tokens carry no '{}' channel)\n", distance,
               distance);
  else if (train::text_decoder(c) && reads_data)
    fmt::print("sample: none (position '{}' reads position channels that generated tokens do not carry)\n",
               c.model.position);
  return 0;
}

Action setup(CLI::App& cmd) {
  auto a = std::make_shared<Args>();
  cmd.add_option("config", a->config, "YAML config file")->required();
  cmd.add_option("--set", a->sets, "override a config value, e.g. --set model.n_layers=4 (repeatable)");
  cmd.add_option("--resume", a->resume,
                 "continue from a run directory (latest checkpoint) or a checkpoint; "
                 "the run continues in that directory");
  cmd.add_flag("--overwrite", a->overwrite,
               "replace the run files (checkpoints, metrics, config.yaml) of a non-empty output.dir");
  cmd.add_flag("--ignore-memory-check", a->ignore_memory,
               "train even when the memory estimate exceeds the available memory (MemAvailable, cgroup limits)");
  return [a](Context& ctx) { return run(*a, ctx); };
}

}  // namespace

Command train_command() {
  return {"train", "train a model from a YAML config", setup};
}

}  // namespace relpos::cli
