// experiments/sweep.h — `relpos sweep SPEC.yaml`: one base config, a grid and/or a list of
// override sets, one run directory per point, an index (sweep.jsonl), resumable, shardable.
//
// Spec: the keys and their checks are the tables of sweep_spec.cpp (docs/config.md embeds them,
// `relpos list --sweep`). For example:
//   base: ../decoder_rope.yaml
//   grid: {model.position.type: [none, alibi, rope], optim.lr: [1e-3, 3e-3]}
//   points: [{name: baseline}, {name: qk_norm, set: {model.qk_norm: layernorm}}]
//   seeds: 3
//   eval: {lengths: [64, 128, 256], mode: [windows, sliding]}
//
// Point i runs in <dir>/<NNN>_<values> with output.dir set there. After training (and the
// evaluations, if `eval` is given) one JSON line is appended to this process's index file:
//   {"index", "name", "run_dir", "grid": {key: value}, "recipe", "overrides": [..],
//    "status": "done", "final_train_loss", "final_val_loss", "first_divergence_step",
//    "seconds", "finished_at" (Unix time), "steps",
//    "eval": [{"seq_len", "mode", "loss", "beyond_loss", "buckets"...}]}
// Index files (sweep_index_name): a whole run appends to <dir>/sweep.jsonl; a shard
// (--shard I/N: the points i with i mod N == I) to <dir>/sweep.shard-I-of-N.jsonl; a single
// point (--point I) to <dir>/sweep.point-I.jsonl. No two processes ever append to one file, so
// shards and single points may run at the same time, on different machines, into one shared
// (e.g. NFS) sweep directory. Everything that reads the index reads all of them merged
// (read_sweep_index; scripts/report.py does the same): one record per point name, a "done"
// record preferred over any other, the latest "finished_at" among equals, ordered by index.
// A point already "done" in any index file is skipped; a point whose run directory holds a
// checkpoint resumes from it (finished training: evaluation only); points are matched by name,
// so values can be added to a grid and only the new points run. <dir>/sweep.json holds the
// spec's point names (in order), grid keys, recipes, eval lengths and modes (for `relpos report`); every
// process writes the same content, atomically (temporary file + rename).
// --jobs N runs N points at once, each with max(1, threads / N) CPU threads.
// `relpos sweep SPEC --print-commands` prints one `relpos sweep SPEC --point I` line per point
// (for GNU parallel or a Slurm job array, docs/cluster.md) and runs nothing. Do not run two
// processes whose selections overlap at the same time: both would train the same point.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace relpos::train {

struct SweepPoint {
  int64_t index = 0;
  std::string name;                                      // "type=alibi lr=0.003 qk_norm"
  std::string dir_name;                                  // "003_alibi_0.003_qk_norm"
  std::vector<std::pair<std::string, std::string>> grid; // key -> value (YAML scalar text)
  std::string recipe;                                    // points[].name ("" without points)
  std::vector<std::string> overrides;                    // "a.b=v", applied in order
};

struct SweepSpec {
  std::string source, dir, base_yaml;
  std::vector<std::string> base_overrides;  // from `config:`
  std::vector<std::string> grid_keys, recipes;
  std::vector<SweepPoint> points;
  std::vector<int64_t> eval_lengths;
  std::vector<std::string> eval_modes = {"windows"};  // eval.mode: one mode or a list
  std::vector<std::string> eval_val_paths;            // eval.val_paths: one validation file per length (or none)
  int64_t eval_stride = 0, eval_bucket = 0, eval_max_tokens = 0;
  std::string eval_subset_channel;  // eval.subset_channel (EvalOptions::subset_channel)
  int64_t eval_subset_min = 8;      // eval.subset_min
  int64_t checkpoint_every = 0;
};

// The spec validated whole before anything runs: its keys and types (errors name file:line and
// the key), unique point names, the number of points (refused above max_points before any is
// expanded), and every point's config.
inline constexpr int64_t kDefaultMaxSweepPoints = 10000;
inline constexpr int64_t kMaxSeeds = 1000;             // seeds: N
inline constexpr const char* kSeedKey = "train.seed";  // the grid key seeds: N adds (report.py: SEED_KEY)
inline constexpr int64_t kMaxSweepPoints = int64_t(1) << 30;  // the largest --max-points
SweepSpec load_sweep_spec(const std::string& path, int64_t max_points = kDefaultMaxSweepPoints);
// The key table of a spec ("spec") or of its eval mapping ("eval") as Markdown, as
// docs/experiments.md embeds it (`relpos list --sweep --markdown`); sweep_spec.cpp's tables are
// the one list of the keys a spec may hold.
std::string sweep_spec_markdown(const std::string& table);

struct SweepOptions {
  int jobs = 1;
  int threads = 0;  // total CPU threads (0: all)
  std::string dir;  // overrides spec.dir
  std::function<void(const std::string&)> log;
  // Test hook: called before a point starts training; throwing aborts the sweep there.
  std::function<void(const SweepPoint&)> before_point;
  // Test hook: called after each training step's backward (TrainOptions::after_backward);
  // throwing there interrupts a point mid-training.
  std::function<void(const SweepPoint&, int64_t step)> train_hook;
  // Which points this process runs: point i belongs to shard i mod shard_count (0-based).
  int shard_index = 0, shard_count = 1;
  // Only this point (an index into spec.points); -1: every point of the shard. Not with shards.
  int64_t point = -1;
};

// "I/N" -> {I, N} with 0 <= I < N; ConfigError "--shard: expected I/N with 0 <= I < N, got '3/2'".
std::pair<int, int> parse_shard(const std::string& text);
// The point named by `text`: its index (0-based) or its name; ConfigError naming --point otherwise.
int64_t find_point(const SweepSpec& spec, const std::string& text);
// The points a run with these options covers, in index order.
std::vector<int64_t> selected_points(const SweepSpec& spec, const SweepOptions& opt);
// The index file (a name inside the sweep directory) a run with these options appends to:
// sweep.jsonl, sweep.shard-I-of-N.jsonl or sweep.point-I.jsonl.
std::string sweep_index_name(const SweepOptions& opt);
// Every index file in dir: sweep.jsonl first, then sweep.shard-*.jsonl and sweep.point-*.jsonl
// sorted by name (full paths; missing directory: none).
std::vector<std::string> sweep_index_files(const std::string& dir);
// All index files merged: one record per point name (a "done" record wins over any other; among
// equals the larger "finished_at", then the later file and line), ordered by "index" then name.
// Lines that are not JSON objects with a "name" (e.g. cut short by a crash) are ignored.
std::vector<nlohmann::json> read_sweep_index(const std::string& dir);

struct SweepResult {
  int64_t ran = 0, skipped = 0;
  int64_t failed = 0;  // points this run tried whose training threw (their index record has "error")
  double seconds = 0;
  std::vector<nlohmann::json> records;  // every point's record, in index order (null: not selected)
  std::string summary;                  // the table printed at the end
  std::string index_file;               // the index file this run appended to (full path)
};

SweepResult run_sweep(const SweepSpec& spec, const SweepOptions& opt = {});

}  // namespace relpos::train
