// relpos list [--params [--markdown]]
// The registered position encodings (and their parameters; --markdown: the table of
// docs/config.md).
#include <fmt/format.h>

#include "cli/command.h"
#include "nn/positional/registry.h"

namespace relpos::cli {
namespace {

struct Args {
  bool params = false, markdown = false;
};

int run(const Args& a) {
  if (a.markdown && !a.params) throw UsageError("--markdown needs --params");
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
  cmd.add_flag("--markdown", a->markdown, "with --params: the Markdown table of docs/config.md");
  return [a](Context&) { return run(*a); };
}

}  // namespace

Command list_command() {
  return {"list", "list the registered position encodings", setup};
}

}  // namespace relpos::cli
