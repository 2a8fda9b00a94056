// cli/command.h — the verbs of the relpos executable. Each file in cli/verbs/ holds one verb:
// its options, its help line and its action together; cli/commands.cpp lists them, and
// cli/main.cpp parses the command line and maps errors to exit codes.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "core/error.h"
#include "trainers/dist/comm.h"

namespace relpos::cli {

// What a verb may use besides its own options.
struct Context {
  int threads = 0;    // --threads (0: OMP_NUM_THREADS or all cores)
  std::string argv0;  // the executable as invoked
  // The communicator of a data-parallel `relpos train` (null otherwise); an error in any
  // verb stops the whole job through it (cli/main.cpp).
  std::unique_ptr<train::Communicator> comm;
};

// Runs the verb with the options its setup declared; returns the exit status.
using Action = std::function<int(Context&)>;

struct Command {
  const char* name;
  const char* help;  // one line, for `relpos --help`
  // Declares the verb's options on its subcommand and returns the action that reads them.
  Action (*setup)(CLI::App& cmd);
};

// Every verb, in the order `relpos --help` lists them.
const std::vector<Command>& commands();

// A mistake on the command line that the parser cannot see (exit 2, like a parse error).
struct UsageError : Error {
  using Error::Error;
};

// --param key=value (repeatable) as a map; UsageError for an entry without '='.
std::map<std::string, std::string> parse_params(const std::vector<std::string>& kvs);

// A word for sh: as is when it holds only characters no shell treats specially, else in
// single quotes (an embedded ' becomes '\'').
std::string shell_quote(const std::string& s);

// --precision fp32|bf16|fp16 of eval and sample (autograd/autocast.h); empty: the run's
// train.precision.
CLI::Option* add_precision_option(CLI::App& cmd, std::string& out);
Precision precision_or(const std::string& option, Precision run_precision);

}  // namespace relpos::cli
