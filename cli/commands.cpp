// cli/commands.cpp — the verb table (cli/command.h) and the helpers verbs share.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string_view>

#include "cli/command.h"

namespace relpos::cli {

// One per file in cli/verbs/.
Command train_command();
Command validate_command();
Command eval_command();
Command sample_command();
Command sweep_command();
Command report_command();
Command inspect_command();
Command gradcheck_command();
Command bias_command();
Command list_command();
Command info_command();
Command demo_command();
Command data_command();

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {train_command(), validate_command(), eval_command(),    sample_command(),
                                           sweep_command(), report_command(),   inspect_command(), gradcheck_command(),
                                           bias_command(),  list_command(),     info_command(),    demo_command(),
                                           data_command()};
  return all;
}

std::map<std::string, std::string> parse_params(const std::vector<std::string>& kvs) {
  std::map<std::string, std::string> out;
  for (const auto& kv : kvs) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError(fmt::format("--param '{}': expected key=value", kv));
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

std::string shell_quote(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_-./+=:,@%").find(c) != std::string_view::npos;
  });
  if (plain) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

CLI::Option* add_precision_option(CLI::App& cmd, std::string& out) {
  return cmd
      .add_option("--precision", out,
                  "matmul/attention precision, emulated as in training (default: the run's train.precision)")
      ->check(CLI::IsMember(enum_names<Precision>()));
}

Precision precision_or(const std::string& option, Precision run_precision) {
  return option.empty() ? run_precision : *parse_enum<Precision>(option);
}

}  // namespace relpos::cli
