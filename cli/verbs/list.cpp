// relpos list [--params [--markdown]] | relpos list --config [--markdown] | relpos list --env [--markdown]
//   | relpos list --sweep [--markdown]
// The registered position encodings (and their parameters; --markdown: the table of
// docs/config.md), the keys of a training config (the tables of docs/config.md), the
// environment switches (core/env.cpp's table; --markdown: the table of docs/config.md), or the
// keys of a sweep spec (sweep_spec.cpp's tables; --markdown: those of docs/experiments.md).
#include <fmt/format.h>

#include "cli/command.h"
#include "core/env.h"
#include "nn/positional/registry.h"
#include "trainers/config.h"
#include "experiments/sweep.h"

namespace relpos::cli {
namespace {

struct Args {
  bool params = false, config = false, env = false, sweep = false, markdown = false;
};

// Every section's key table; --markdown: as docs/config.md holds them, between the markers
// its test compares.
int list_config(bool markdown) {
  for (const std::string& section : train::config_sections()) {
    if (markdown) {
      fmt::print("<!-- begin: relpos list --config --markdown: {} -->\n{}<!-- end: {} -->\n\n", section,
                 train::config_keys_markdown(section), section);
      continue;
    }
    fmt::print("{}:\n", section);
    for (const auto& k : train::config_key_docs(section))
      fmt::print("    {:<24} {:<36} default {}\n", k.key, k.type, k.default_value);
  }
  return 0;
}

int list_env(bool markdown) {
  if (markdown) {
    fmt::print("<!-- begin: relpos list --env --markdown -->\n{}<!-- end: env -->\n", env_switches_markdown());
    return 0;
  }
  for (const EnvSwitch& s : env_switches())
    fmt::print("{:<26} {:<44} {}{}\n", s.name, s.values, s.meaning, s.test_only ? " (test only)" : "");
  return 0;
}

// The sweep spec's key tables (the spec's keys, then its eval mapping's), as Markdown either way:
// with --markdown between the markers docs/experiments.md's test compares.
int list_sweep(bool markdown) {
  for (const std::string table : {"spec", "eval"}) {
    const std::string md = train::sweep_spec_markdown(table);
    if (markdown) fmt::print("<!-- begin: relpos list --sweep --markdown: {} -->\n{}<!-- end: {} -->\n\n", table, md, table);
    else fmt::print("{}:\n{}\n", table == "spec" ? "sweep spec keys" : "eval: keys", md);
  }
  return 0;
}

int run(const Args& a) {
  if (int(a.params) + int(a.config) + int(a.env) + int(a.sweep) > 1)
    throw UsageError("--params, --config, --env and --sweep list different things: give one");
  if (a.config) return list_config(a.markdown);
  if (a.env) return list_env(a.markdown);
  if (a.sweep) return list_sweep(a.markdown);
  if (a.markdown && !a.params) throw UsageError("--markdown needs --params, --config, --env or --sweep");
  if (a.markdown) {
    fmt::print("{}", nn::position_params_markdown());
    return 0;
  }
  for (const auto& v : nn::position_variants()) {
    fmt::print("{:<15} {}{}{}\n", v.name, v.description, v.causal_capable ? "" : " [encoder only]",
               a.params && v.per_layer ? " [per layer by default]" : "");
    if (!a.params) continue;
    for (const auto& p : v.params)
      fmt::print("    {:<24} {:<30} default {:<20} {}\n", p.name, p.type_name(), p.default_text(), p.doc);
  }
  return 0;
}

Action setup(CLI::App& cmd) {
  auto a = std::make_shared<Args>();
  cmd.add_flag("--params", a->params, "also print each encoding's parameters (type, default, meaning)");
  cmd.add_flag("--config", a->config, "the keys of a training config (type, default) instead of the encodings");
  cmd.add_flag("--env", a->env, "the environment switches (name, values, meaning) instead of the encodings");
  cmd.add_flag("--sweep", a->sweep, "the keys of a sweep spec (type, default, meaning) instead of the encodings");
  cmd.add_flag("--markdown", a->markdown,
               "with --params, --config or --env: the Markdown tables of docs/config.md; with --sweep: those of "
               "docs/experiments.md");
  return [a](Context&) { return run(*a); };
}

}  // namespace

Command list_command() {
  return {"list", "list the registered position encodings (or, with --config, the config keys)", setup};
}

}  // namespace relpos::cli
