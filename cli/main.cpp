// cli/main.cpp — the relpos executable: `relpos VERB [options]`, one verb per file in
// cli/verbs/ (the list: cli/commands.cpp; `relpos --help`, `relpos VERB --help`).
//   relpos --version                                   version and git commit
//   relpos --threads N VERB ...                        CPU threads (default: OMP_NUM_THREADS or all cores)
// Exit codes: 0 ok, 2 usage or config error (including a config that does not fit in memory),
// 1 runtime failure (a failed gradcheck, a damaged checkpoint, an I/O error, out of memory).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "cli/command.h"
#include "core/env.h"
#include "core/error.h"
#include "kernels/ops.h"
#include "relpos/version.h"
#include "relpos_build_info.h"
#ifdef RELPOS_WITH_SENTENCEPIECE
#include "trainers/data/sentencepiece/sentencepiece.h"
#endif

namespace {

using relpos::cli::Context;

// Prints "<kind>: <what>" and returns the exit status; in a data-parallel run the message
// names the rank and the whole job stops with that status (no rank is left waiting).
int report_error(const Context& ctx, int code, const char* kind, const std::string& raw) {
  // Bounded, and no control byte reaches the terminal (a value from a damaged file, a 15 MiB
  // --set): each line of the message through echo_value, the whole at most 64 KiB.
  std::string what;
  for (size_t a = 0; a <= raw.size() && what.size() < (64u << 10);) {
    const size_t b = std::min(raw.find('\n', a), raw.size());
    what += (a ? "\n" : "") + relpos::echo_value(std::string_view(raw).substr(a, b - a), 4096);
    a = b + 1;
  }
  if (ctx.comm && ctx.comm->size() > 1)
    ctx.comm->abort(code, fmt::format("{} (rank {} of {}): {}", kind, ctx.comm->rank(), ctx.comm->size(), what));
  // fputs, not fmt::print: a standard error that cannot be written (a full disk) must not throw here
  std::fputs(fmt::format("{}: {}\n", kind, what).c_str(), stderr);
  return code;
}

int stdout_failed(const Context& ctx) {
  const int err = errno;
  std::clearerr(stdout);
  return report_error(ctx, 1, "error",
                      fmt::format("cannot write to standard output: {}", err ? std::strerror(err) : "write error"));
}

// Runs the action and maps every error to its exit status and message.
int run_verb(const relpos::cli::Action& action, Context& ctx) {
  try {
    relpos::validate_environment();  // every RELPOS_* switch (core/env.cpp), before anything starts
    if (ctx.threads > 0) relpos::k::set_num_threads(ctx.threads);
    return action(ctx);
  } catch (const relpos::cli::UsageError& e) {
    return report_error(ctx, 2, "error", e.what());
  } catch (const relpos::ConfigError& e) {
    return report_error(ctx, 2, "error", e.what());
  } catch (const relpos::Error& e) {
    return report_error(ctx, 1, "error", e.what());
  } catch (const std::bad_alloc&) {
    return report_error(ctx, 1, "error",
                        "out of memory (an allocation failed); reduce the sizes in the config or free memory");
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that the file system refuses (a symlink loop, a file where a
    // directory is needed, no permission): the path and the system's reason, not a bug.
    std::string paths = e.path1().empty() ? "" : " '" + e.path1().string() + "'";
    if (!e.path2().empty()) paths += " -> '" + e.path2().string() + "'";
    return report_error(ctx, 1, "error", fmt::format("file system:{} {}", paths, e.code().message()));
  } catch (const std::exception& e) {
    if (std::ferror(stdout)) return stdout_failed(ctx);  // fmt::print's write error: the output, not a bug
    return report_error(ctx, 1, "internal error", e.what());
  }
}

// The verb's result reached its reader only when standard output takes it all (a full disk,
// /dev/full, a closed pipe: exit 1 and why, never exit 0 with the output lost).
int finish(const Context& ctx, int code) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) return stdout_failed(ctx);
  if (std::fflush(stderr) != 0 || std::ferror(stderr)) return code != 0 ? code : 1;  // nowhere left to say why
  return code;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef RELPOS_WITH_SENTENCEPIECE
  relpos::train::register_sentencepiece();  // data.tokenizer.type sentencepiece
#endif
  CLI::App app{"relpos — train small transformers with relative position encodings"};
  app.require_subcommand(0, 1);
  bool show_version = false;
  app.add_flag("--version", show_version, "print the version and git commit");
  Context ctx;
  ctx.argv0 = argv[0];
  app.add_option("--threads", ctx.threads, "CPU threads (default: OMP_NUM_THREADS or all cores)")
      ->check(CLI::NonNegativeNumber);
  std::vector<std::pair<CLI::App*, relpos::cli::Action>> verbs;
  for (const relpos::cli::Command& c : relpos::cli::commands()) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    verbs.emplace_back(sub, c.setup(*sub));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (show_version) {
    fmt::print("relpos {} (commit {})\n", RELPOS_VERSION, RELPOS_GIT_COMMIT);
    return 0;
  }
  for (const auto& [sub, action] : verbs)
    if (*sub) return finish(ctx, run_verb(action, ctx));
  fmt::print(stderr, "{}\nerror: a subcommand is required\n", app.help());
  return 2;
}
