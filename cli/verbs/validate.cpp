// relpos validate CONFIG [--set k=v ...] [--ignore-memory-check]
// What train checks before it starts, without training: the config, the data file (a text file:
// exists, readable, UTF-8; a token file: its header; a subword tokenizer: the library) and the
// memory estimate.
#include <fmt/format.h>

#include "cli/command.h"
#include "trainers/config.h"
#include "trainers/data/data.h"
#include "trainers/data/data_tasks.h"
#include "trainers/limits.h"

namespace relpos::cli {
namespace {

struct Args {
  std::string config;
  std::vector<std::string> sets;
  bool ignore_memory = false;
};

int run(const Args& a) {
  const train::Config c = train::load_config(a.config, a.sets);
  const int64_t vocab = train::data_vocab_size(c);
  train::check_device_usable(c.train.device);  // as train refuses it
  const train::ResourceEstimate est = train::estimate_resources(c, vocab);
  train::check_memory(est, a.ignore_memory, "validate");
  fmt::print("{}: ok ({} {} with {} position encoding, task {}, {} steps; {} parameters, estimated memory {})\n",
             a.config, c.model.kind, fmt::format("d_model {} x {} layers", c.model.d_model, c.model.n_layers),
             c.model.position, c.data.task, c.train.steps, est.parameters, est.str());
  return 0;
}

Action setup(CLI::App& cmd) {
  auto a = std::make_shared<Args>();
  cmd.add_option("config", a->config, "YAML config file")->required();
  cmd.add_option("--set", a->sets, "override a config value (repeatable)");
  cmd.add_flag("--ignore-memory-check", a->ignore_memory, "report the memory estimate without refusing");
  return [a](Context&) { return run(*a); };
}

}  // namespace

Command validate_command() {
  return {"validate", "check a config (and its --set overrides) without training", setup};
}

}  // namespace relpos::cli
