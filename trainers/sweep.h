// trainers/sweep.h — `relpos sweep SPEC.yaml`: one base config, a grid and/or a list of
// override sets, one run directory per point, an index (sweep.jsonl), resumable.
//
// Spec (every key but `base`/`config` optional):
//   base: ../decoder_rope.yaml        base config file (relative to the spec file)
//   config: {model: {...}, ...}       inline config, applied over `base` (as --set overrides)
//   dir: runs/sweeps/NAME             sweep directory (default runs/sweeps/<spec file stem>)
//   grid:                             cartesian product, in key order
//     model.position.type: [none, alibi, rope]
//     optim.lr: [1e-3, 3e-3]
//   points:                           named override sets, crossed with the grid (inner loop)
//     - {name: baseline}
//     - {name: qk_norm, set: {model.qk_norm: layernorm}}
//   checkpoint_every: 100             train.checkpoint_every of every point (resume granularity)
//   eval: {lengths: [64, 128, 256], mode: windows, stride: 0, bucket: 0, max_tokens: 4096}
//
// Point i runs in <dir>/<NNN>_<values> with output.dir set there. After training (and the
// evaluations, if `eval` is given) one JSON line is appended to <dir>/sweep.jsonl:
//   {"index", "name", "run_dir", "grid": {key: value}, "recipe", "overrides": [..],
//    "status": "done", "final_train_loss", "final_val_loss", "first_divergence_step",
//    "seconds", "steps", "eval": [{"seq_len", "mode", "loss", "beyond_loss", "buckets"...}]}
// A point already "done" in sweep.jsonl is skipped; a point whose run directory holds a
// checkpoint resumes from it (finished training: evaluation only); points are matched by name,
// so values can be added to a grid and only the new points run. <dir>/sweep.json holds the
// spec's point names (in order), grid keys, recipes and eval lengths (for `relpos report`).
// --jobs N runs N points at once, each with max(1, threads / N) CPU threads.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
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
  std::string eval_mode = "windows";
  int64_t eval_stride = 0, eval_bucket = 0, eval_max_tokens = 0;
  int64_t checkpoint_every = 0;
};

SweepSpec load_sweep_spec(const std::string& path);

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
};

struct SweepResult {
  int64_t ran = 0, skipped = 0;
  double seconds = 0;
  std::vector<nlohmann::json> records;  // every point's record, in index order
  std::string summary;                  // the table printed at the end
};

SweepResult run_sweep(const SweepSpec& spec, const SweepOptions& opt = {});

}  // namespace relpos::train
