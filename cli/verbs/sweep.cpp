// relpos sweep SPEC.yaml [--jobs N] [--dir D] [--max-points N]
//                        [--shard I/N | --point I|NAME] [--print-commands]
// A grid of training runs (experiments/sweep.h), resumable; a shard or one point of it; or one
// shell command per point.
#include "experiments/sweep.h"

#include <fmt/format.h>

#include <cstdio>
#include <tuple>

#include "cli/command.h"

namespace relpos::cli {
namespace {

struct Args {
  std::string spec, shard, point;
  train::SweepOptions opt;
  int64_t max_points = train::kDefaultMaxSweepPoints;
  bool print_commands = false;
};

int run(Args a, const Context& ctx) {
  const train::SweepSpec spec = train::load_sweep_spec(a.spec, a.max_points);
  if (!a.shard.empty()) std::tie(a.opt.shard_index, a.opt.shard_count) = train::parse_shard(a.shard);
  if (!a.point.empty()) {
    if (!a.shard.empty()) throw UsageError("--point and --shard: give one of them, not both");
    a.opt.point = train::find_point(spec, a.point);
  }
  if (a.print_commands) {
    // One line per point of the selection: the binary as invoked, the same global options,
    // spec and --dir, and --point I; each line skips its point when it is already done.
    std::string prefix = shell_quote(ctx.argv0);
    if (ctx.threads > 0) prefix += fmt::format(" --threads {}", ctx.threads);
    prefix += " sweep " + shell_quote(a.spec);
    if (!a.opt.dir.empty()) prefix += " --dir " + shell_quote(a.opt.dir);
    for (int64_t i : train::selected_points(spec, a.opt)) fmt::print("{} --point {}\n", prefix, i);
    return 0;
  }
  a.opt.threads = ctx.threads;
  a.opt.log = [](const std::string& s) {
    fmt::print("{}{}", s, (!s.empty() && s.back() == '\n') ? "" : "\n");
    std::fflush(stdout);
  };
  const auto r = train::run_sweep(spec, a.opt);
  fmt::print("\n{}sweep: {} points run, {} skipped, {:.1f} s; index {}\n", r.summary, r.ran, r.skipped, r.seconds,
             r.index_file);
  if (r.failed == 0) return 0;
  // The other points still ran; a script must still see that not everything did.
  fmt::print(stderr, "error: sweep: {} of {} points run failed (each one's \"error\" is in {})\n", r.failed, r.ran,
             r.index_file);
  return 1;
}

Action setup(CLI::App& cmd) {
  auto a = std::make_shared<Args>();
  cmd.add_option("spec", a->spec, "sweep spec YAML (see experiments/sweep.h, docs/config.md)")->required();
  cmd.add_option("--jobs", a->opt.jobs, "points run at once (threads are split between them)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--dir", a->opt.dir, "sweep directory (default: the spec's dir)");
  cmd.add_option("--max-points", a->max_points, "refuse a sweep with more points than this")
      ->check(CLI::Range(int64_t(1), train::kMaxSweepPoints))
      ->capture_default_str();
  cmd.add_option("--shard", a->shard,
                 "I/N: run only the points i with i mod N == I (0 <= I < N); shards may run at once, "
                 "into one directory, each with its own index file sweep.shard-I-of-N.jsonl");
  cmd.add_option("--point", a->point,
                 "run only this point (its index, 0-based, or its name); index file sweep.point-I.jsonl");
  cmd.add_flag("--print-commands", a->print_commands,
               "print one shell command per point (this sweep with --point I) and exit without running "
               "anything (for GNU parallel or a Slurm job array)");
  return [a](Context& ctx) { return run(*a, ctx); };
}

}  // namespace

Command sweep_command() {
  return {"sweep", "run a grid of training runs from a sweep spec (resumable)", setup};
}

}  // namespace relpos::cli
