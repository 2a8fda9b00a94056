// trainers/experiments/sweep.cpp — the sweep runner (see sweep.h): spec parsing, the point list,
// skip/resume bookkeeping in the index files (sweep.jsonl, sweep.shard-*.jsonl,
// sweep.point-*.jsonl), shards and single points, N points at once on split threads.
#include "trainers/experiments/sweep.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>
#include <tuple>

#include "kernels/ops.h"
#include "nn/positional/params.h"
#include "trainers/io/checkpoint.h"
#include "trainers/data/data.h"
#include "trainers/data/data_tasks.h"
#include "trainers/evaluate.h"
#include "trainers/io/file_io.h"
#include "trainers/limits.h"
#include "trainers/trainer.h"

namespace fs = std::filesystem;

namespace relpos::train {

namespace {

std::string yaml_text(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

// {a: {b: 1}} -> ["a.b=1"]; lists and scalars end the recursion.
void flatten(const YAML::Node& n, const std::string& prefix, std::vector<std::string>& out) {
  if (n.IsMap()) {
    for (const auto& kv : n) {
      if (!kv.first.IsScalar())
        fail_config("line {}: config: a key must be a name, got '{}'", kv.first.Mark().line + 1, yaml_text(kv.first));
      flatten(kv.second, prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar(), out);
    }
    return;
  }
  out.push_back(prefix + "=" + yaml_text(n));
}

std::string sanitize(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '-';
  return o;
}

std::string last_component(const std::string& key) {
  auto p = key.rfind('.');
  return p == std::string::npos ? key : key.substr(p + 1);
}

// A file the sweep spec names (base:) or the spec itself: regular files only, size-capped
// (read_whole_file); any failure is a config error (exit 2) naming the file.
std::string read_file(const fs::path& p, std::string_view what = "sweep: base config") {
  try {
    return read_whole_file(p.string(), what, kMaxConfigBytes);
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    fail_config("{}", e.what());
  }
}

// Rows of <run_dir>/metrics.jsonl (a last line cut short is ignored).
std::vector<nlohmann::json> read_metrics(const std::string& run_dir) {
  std::vector<nlohmann::json> rows;
  const std::string path = run_dir + "/metrics.jsonl";
  if (!fs::exists(path)) return rows;
  std::istringstream f(read_whole_file(path, "metrics file", kMaxMetricsBytes));
  for (std::string line; std::getline(f, line);) {
    if (line.empty()) continue;
    try {
      rows.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception&) {
    }
  }
  return rows;
}

nlohmann::json num_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// A finished point's "eval" records: every eval length in every mode of the spec (text data;
// other tasks, whose examples are independent: random windows only).
nlohmann::json evaluate_point(const SweepSpec& spec, const std::string& run_dir) {
  LoadedRun run = load_run(run_dir);
  const std::vector<std::string> modes =
      find_data_task(run.cfg.data.task).text ? spec.eval_modes : std::vector<std::string>{"random"};
  nlohmann::json evs = nlohmann::json::array();
  for (const std::string& mode : modes) {
    for (int64_t L : spec.eval_lengths) {
      EvalOptions eo;
      eo.seq_len = L;
      eo.mode = mode;
      eo.stride = spec.eval_stride;
      eo.bucket = spec.eval_bucket;
      eo.max_tokens = spec.eval_max_tokens;
      eo.subset_channel = spec.eval_subset_channel;
      eo.subset_min = spec.eval_subset_min;
      PositionEval e = evaluate_positions(*run.model, *run.data, run.cfg, eo);
      nlohmann::json bj = nlohmann::json::array();
      for (auto& b : e.buckets) bj.push_back({{"lo", b.lo}, {"hi", b.hi}, {"loss", num_or_null(b.loss)}, {"tokens", b.tokens}});
      evs.push_back({{"seq_len", L}, {"mode", e.mode}, {"stride", e.stride}, {"loss", e.loss},
                     {"accuracy", e.accuracy}, {"tokens", e.tokens}, {"beyond_loss", num_or_null(e.beyond_loss)},
                     {"beyond_tokens", e.beyond_tokens}, {"buckets", bj}});
      if (!e.subset.empty()) {
        evs.back()["subset"] = e.subset;
        evs.back()["subset_loss"] = num_or_null(e.subset_loss);
        evs.back()["subset_tokens"] = e.subset_tokens;
      }
    }
  }
  return evs;
}

}  // namespace

namespace {

// Typed reads of a sweep spec's YAML, every failure a ConfigError naming file:line and the key.
struct SpecReader {
  std::string path;

  [[noreturn]] void bad(const YAML::Node& n, const std::string& key, const std::string& what) const {
    fail_config("{}:{}: {}: {}", path, n.Mark().line + 1, key, what);
  }
  void known_keys(const YAML::Node& map, const std::string& where, const std::vector<std::string>& known) const {
    if (!map.IsMap()) bad(map, where, "expected a mapping with keys " + fmt::format("{}", fmt::join(known, ", ")));
    for (const auto& kv : map) {
      const std::string k = kv.first.Scalar();
      if (std::find(known.begin(), known.end(), k) == known.end()) {
        const std::string hint = nn::did_you_mean(k, known);
        fail_config("{}:{}: unknown sweep key '{}'; expected one of {}{}", path, kv.first.Mark().line + 1,
                    where.empty() ? k : where + "." + k, fmt::join(known, ", "),
                    hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint));
      }
    }
  }
  int64_t integer(const YAML::Node& n, const std::string& key, int64_t lo, int64_t hi) const {
    int64_t v = 0;
    if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v))
      bad(n, key, fmt::format("expected an integer, got '{}'", yaml_text(n)));
    if (v < lo || v > hi) bad(n, key, fmt::format("{} is out of range (expected {} <= value <= {})", v, lo, hi));
    return v;
  }
  std::string scalar(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar()) bad(n, key, fmt::format("expected a string, got '{}'", yaml_text(n)));
    return n.Scalar();
  }
};

void read_eval(const SpecReader& r, const YAML::Node& e, SweepSpec& s) {
  r.known_keys(e, "eval", {"lengths", "mode", "stride", "bucket", "max_tokens", "subset_channel", "subset_min"});
  if (const YAML::Node l = e["lengths"]) {
    if (!l.IsSequence()) r.bad(l, "eval.lengths", fmt::format("expected a list of lengths, e.g. [64, 128], got '{}'", yaml_text(l)));
    for (const auto& v : l) s.eval_lengths.push_back(r.integer(v, "eval.lengths", 1, kMaxLen));
  }
  if (const YAML::Node m = e["mode"]) {  // one mode or a list of them
    s.eval_modes.clear();
    if (m.IsSequence()) {
      for (const auto& v : m) s.eval_modes.push_back(r.scalar(v, "eval.mode"));
      if (s.eval_modes.empty()) r.bad(m, "eval.mode", "an empty list; expected random, windows or sliding, or a list of them");
    } else {
      s.eval_modes.push_back(r.scalar(m, "eval.mode"));
    }
    std::set<std::string> seen;
    for (const auto& mode : s.eval_modes) {
      if (mode != "random" && mode != "windows" && mode != "sliding")
        r.bad(m, "eval.mode", fmt::format("'{}': expected random, windows or sliding, or a list of them", mode));
      if (!seen.insert(mode).second) r.bad(m, "eval.mode", fmt::format("'{}' is listed twice", mode));
    }
  }
  if (e["stride"]) s.eval_stride = r.integer(e["stride"], "eval.stride", 1, kMaxLen);
  if (e["bucket"]) s.eval_bucket = r.integer(e["bucket"], "eval.bucket", 1, kMaxLen);
  if (e["max_tokens"]) s.eval_max_tokens = r.integer(e["max_tokens"], "eval.max_tokens", 1, kMaxRepeat);
  if (e["subset_channel"]) s.eval_subset_channel = r.scalar(e["subset_channel"], "eval.subset_channel");
  if (e["subset_min"]) s.eval_subset_min = r.integer(e["subset_min"], "eval.subset_min", 1, kMaxLen);
  if (std::count(s.eval_modes.begin(), s.eval_modes.end(), "sliding") && s.eval_stride > 0)
    for (int64_t L : s.eval_lengths)
      RELPOS_CHECK_CONFIG(s.eval_stride <= L, "{}: eval.stride {} must not exceed every eval length (got length {})",
                          r.path, s.eval_stride, L);
}

// grid: key -> value or list of values (cartesian product in key order, the last key fastest)
std::vector<std::vector<std::string>> read_grid(const SpecReader& r, const YAML::Node& g, SweepSpec& s) {
  std::vector<std::vector<std::string>> values;
  if (!g.IsMap()) r.bad(g, "grid", "expected a mapping key -> list of values");
  for (const auto& kv : g) {
    s.grid_keys.push_back(r.scalar(kv.first, "grid key"));
    std::vector<std::string> vs;
    if (kv.second.IsSequence())
      for (const auto& v : kv.second) vs.push_back(yaml_text(v));
    else
      vs.push_back(yaml_text(kv.second));
    if (vs.empty()) r.bad(kv.second, "grid." + s.grid_keys.back(), "has no values");
    values.push_back(vs);
  }
  return values;
}

struct Recipe {
  std::string name;
  std::vector<std::string> sets;
  // points[].only: per grid key (same index as the grid), the values this recipe runs with;
  // empty: every value of that key.
  std::vector<std::set<std::string>> only;

  bool applies(const std::vector<std::vector<std::string>>& values, const std::vector<size_t>& idx) const {
    for (size_t k = 0; k < only.size(); ++k)
      if (!only[k].empty() && !only[k].count(values[k][idx[k]])) return false;
    return true;
  }
  // How many grid combinations it applies to (capped at limit + 1: no overflow).
  int64_t combinations(const std::vector<std::vector<std::string>>& values, int64_t limit) const {
    int64_t n = 1;
    for (size_t k = 0; k < values.size(); ++k) {
      const bool some = k < only.size() && !only[k].empty();
      n = std::min(n * int64_t(some ? only[k].size() : values[k].size()), limit + 1);
    }
    return n;
  }
};

// points: [{name, set: {key: value}, only: {grid key: value or [values]}}]
std::vector<Recipe> read_points(const SpecReader& r, const YAML::Node& p, const std::vector<std::string>& grid_keys,
                                const std::vector<std::vector<std::string>>& values) {
  std::vector<Recipe> recipes;
  if (!p.IsSequence()) r.bad(p, "points", "expected a list of {name, set, only}");
  std::set<std::string> names;
  for (const auto& e : p) {
    r.known_keys(e, "points[]", {"name", "set", "only"});
    Recipe rc;
    rc.name = e["name"] ? r.scalar(e["name"], "points[].name") : fmt::format("point{}", recipes.size());
    if (!names.insert(rc.name).second) r.bad(e, "points[].name", fmt::format("'{}' is used twice; names must be unique", rc.name));
    if (const YAML::Node set = e["set"]) {
      if (!set.IsMap()) r.bad(set, "points[" + rc.name + "].set", "expected a mapping key -> value");
      for (const auto& kv : set) {
        const std::string key = r.scalar(kv.first, "points[].set key");
        // A grid key set by a recipe would override the grid's value: every point of the recipe
        // would run the same value while its name and record claim another (with seeds: N, N
        // "seeds" that are one seed, and a report's interval that is not one).
        if (std::find(grid_keys.begin(), grid_keys.end(), key) != grid_keys.end())
          r.bad(kv.first, "points[" + rc.name + "].set",
                key == kSeedKey ? fmt::format("sets {}, which the sweep varies (seeds: N or a {} grid): every seed "
                                              "would run with the same seed; remove it from the point's set",
                                              key, key)
                                : fmt::format("sets {}, which is a grid key: it would override the grid's value in "
                                              "every point; use points[].only to restrict the grid instead",
                                              key));
        rc.sets.push_back(key + "=" + yaml_text(kv.second));
      }
    }
    if (const YAML::Node only = e["only"]) {
      const std::string where = "points[" + rc.name + "].only";
      if (!only.IsMap()) r.bad(only, where, "expected a mapping grid key -> value or list of values");
      for (const auto& kv : only) {
        const std::string key = r.scalar(kv.first, where + " key");
        const auto it = std::find(grid_keys.begin(), grid_keys.end(), key);
        if (it == grid_keys.end())
          r.bad(kv.first, where,
                fmt::format("'{}' is not a grid key (the grid has: {})", key, fmt::join(grid_keys, ", ")));
        const size_t k = size_t(it - grid_keys.begin());
        rc.only.resize(values.size());
        std::set<std::string>& allowed = rc.only[k];
        const auto add = [&](const YAML::Node& v) {
          const std::string text = yaml_text(v);
          if (std::find(values[k].begin(), values[k].end(), text) == values[k].end())
            r.bad(v, where + "." + key,
                  fmt::format("'{}' is not one of the grid's values ({})", text, fmt::join(values[k], ", ")));
          allowed.insert(text);
        };
        if (kv.second.IsSequence())
          for (const auto& v : kv.second) add(v);
        else
          add(kv.second);
        if (allowed.empty()) r.bad(kv.second, where + "." + key, "has no values");
      }
    }
    recipes.push_back(rc);
  }
  return recipes;
}

// One point per grid combination x recipe (that recipe's `only` permitting); names and
// directory names unique.
void expand_points(const std::vector<std::vector<std::string>>& values, const std::vector<Recipe>& recipes,
                   SweepSpec& s) {
  std::set<std::string> names;
  std::vector<size_t> idx(values.size(), 0);
  for (bool more = true; more;) {
    for (const auto& r : recipes) {
      if (!r.applies(values, idx)) continue;
      SweepPoint pt;
      pt.index = int64_t(s.points.size());
      std::vector<std::string> parts, dirs;
      for (size_t k = 0; k < values.size(); ++k) {
        pt.grid.emplace_back(s.grid_keys[k], values[k][idx[k]]);
        pt.overrides.push_back(s.grid_keys[k] + "=" + values[k][idx[k]]);
        parts.push_back(last_component(s.grid_keys[k]) + "=" + values[k][idx[k]]);
        dirs.push_back(sanitize(values[k][idx[k]]));
      }
      pt.recipe = r.name;
      if (!r.name.empty()) parts.push_back(r.name), dirs.push_back(sanitize(r.name));
      pt.overrides.insert(pt.overrides.end(), r.sets.begin(), r.sets.end());
      for (size_t i = 0; i < parts.size(); ++i) pt.name += (i ? " " : "") + parts[i];
      RELPOS_CHECK_CONFIG(names.insert(pt.name).second, "{}: two points are both named '{}' (a value repeated in the "
                          "grid?); point names must be unique", s.source, pt.name);
      pt.dir_name = fmt::format("{:03d}", pt.index);
      for (const auto& d : dirs) pt.dir_name += "_" + d;
      s.points.push_back(pt);
    }
    more = false;  // odometer over the grid
    for (size_t k = values.size(); k-- > 0;) {
      if (++idx[k] < values[k].size()) {
        more = true;
        break;
      }
      idx[k] = 0;
    }
  }
}

}  // namespace

SweepSpec load_sweep_spec(const std::string& path, int64_t max_points) {
  SweepSpec s;
  s.source = path;
  const YAML::Node root = load_one_document(read_file(path, "sweep spec"), path);
  const SpecReader r{path};
  check_yaml_size(root, path);
  if (!root.IsMap()) fail_config("{}: a sweep spec is a mapping (base, config, grid, points, eval, dir)", path);
  r.known_keys(root, "", {"base", "config", "dir", "grid", "points", "eval", "checkpoint_every", "seeds"});
  RELPOS_CHECK_CONFIG(root["base"] || root["config"], "{}: a sweep needs 'base' (a config file) or 'config'", path);
  if (root["base"]) s.base_yaml = read_file(fs::path(path).parent_path() / r.scalar(root["base"], "base"));
  if (const YAML::Node c = root["config"]) {
    if (!c.IsMap()) r.bad(c, "config", fmt::format("expected a mapping of config keys (e.g. {{train: {{steps: 100}}}}), got '{}'", yaml_text(c)));
    flatten(c, "", s.base_overrides);
  }
  s.dir = root["dir"] ? r.scalar(root["dir"], "dir") : "runs/sweeps/" + fs::path(path).stem().string();
  if (root["checkpoint_every"]) s.checkpoint_every = r.integer(root["checkpoint_every"], "checkpoint_every", 0, kMaxRepeat);
  if (root["eval"]) read_eval(r, root["eval"], s);
  std::vector<std::vector<std::string>> values = root["grid"] ? read_grid(r, root["grid"], s)
                                                              : std::vector<std::vector<std::string>>{};
  if (const YAML::Node n = root["seeds"]) {  // seeds: N = the innermost grid key train.seed: [1 .. N]
    const int64_t seeds = r.integer(n, "seeds", 1, kMaxSeeds);
    if (std::find(s.grid_keys.begin(), s.grid_keys.end(), kSeedKey) != s.grid_keys.end())
      r.bad(n, "seeds", fmt::format("the grid already has {}; give either seeds: N or a {} grid", kSeedKey, kSeedKey));
    s.grid_keys.push_back(kSeedKey);
    values.emplace_back();
    for (int64_t i = 1; i <= seeds; ++i) values.back().push_back(std::to_string(i));
  }
  std::vector<Recipe> recipes =
      root["points"] ? read_points(r, root["points"], s.grid_keys, values) : std::vector<Recipe>{};
  for (const auto& rc : recipes) s.recipes.push_back(rc.name);
  if (recipes.empty()) recipes.push_back({});
  // The size first: a grid too large is refused before any point is expanded or validated.
  // (the product stops growing once past the limit: no overflow; max_points <= kMaxSweepPoints)
  int64_t total = 0;
  for (const auto& rc : recipes) total = std::min(total + rc.combinations(values, max_points), max_points + 1);
  RELPOS_CHECK_CONFIG(total <= max_points, "{}: the sweep has {} points (grid x points), more than the limit of {}; "
                      "pass --max-points N to raise it", path, total, max_points);
  expand_points(values, recipes, s);
  // Every point's config must be valid, and its data able to serve training and every eval
  // length, before anything runs. A text file is read once per (path, split).
  std::map<std::pair<std::string, double>, int64_t> val_chars;
  for (const auto& pt : s.points) {
    std::vector<std::string> ov = s.base_overrides;
    ov.insert(ov.end(), pt.overrides.begin(), pt.overrides.end());
    const std::string where = path + ": point '" + pt.name + "'";
    // An error from a point's overrides (--set k=v: ...) names the spec and the point too.
    const Config c = [&] {
      try {
        return parse_config(s.base_yaml, path + " (point " + pt.name + ")", ov);
      } catch (const ConfigError& e) {
        if (std::string_view(e.what()).find(pt.name) != std::string_view::npos) throw;
        fail_config("{}: {}", where, e.what());
      }
    }();
    for (int64_t L : s.eval_lengths) check_positions(c, L, where + ": eval.lengths");
    if (!find_data_task(c.data.task).text || s.eval_lengths.empty()) continue;
    const auto key = std::make_pair(c.data.path, c.data.val_fraction);
    auto it = val_chars.find(key);
    if (it == val_chars.end()) {
      try {
        it = val_chars.emplace(key, int64_t(make_dataset(c)->val_stream().size())).first;
      } catch (const Error& e) {
        fail_config("{}: {}", where, e.what());
      }
    }
    // The strictest evaluation mode (random windows) needs L + 2 validation characters.
    for (int64_t L : s.eval_lengths)
      RELPOS_CHECK_CONFIG(L + 2 <= it->second,
                          "{}: eval.lengths {} needs {} validation characters; data file '{}' has {} in its {:.0f}% "
                          "validation split (data.val_fraction)",
                          where, L, L + 2, c.data.path, it->second, c.data.val_fraction * 100);
  }
  return s;
}

namespace {

// A non-negative decimal integer, the whole of `t` (no sign, no spaces).
bool parse_count(std::string_view t, int64_t& out) {
  if (t.empty() || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
  return ec == std::errc() && p == t.data() + t.size();
}

bool starts_ends(const std::string& s, const std::string& pre, const std::string& suf) {
  return s.size() > pre.size() + suf.size() && s.compare(0, pre.size(), pre) == 0 &&
         s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// sweep.json, written whole or not at all: a temporary file unique to this host and process,
// then rename (atomic on POSIX file systems and NFS), so shards starting together never leave a
// mixed or truncated file.
void write_atomically(const fs::path& path, const std::string& text) {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = 0;
  const fs::path tmp = path.parent_path() / fmt::format(".{}.tmp-{}-{}", path.filename().string(), host, getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    RELPOS_CHECK(f.good(), "sweep: cannot write '{}'", tmp.string());
    f << text;
    f.flush();
    RELPOS_CHECK(f.good(), "sweep: writing '{}' failed", tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp);
    RELPOS_CHECK(false, "sweep: cannot rename '{}' to '{}': {}", tmp.string(), path.string(), ec.message());
  }
}

}  // namespace

std::pair<int, int> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  int64_t i = -1, n = -1;
  const bool ok = slash != std::string::npos && parse_count(std::string_view(text).substr(0, slash), i) &&
                  parse_count(std::string_view(text).substr(slash + 1), n) && n >= 1 && i < n &&
                  n <= std::numeric_limits<int>::max();
  RELPOS_CHECK_CONFIG(ok, "--shard: expected I/N with 0 <= I < N, got '{}'", text);
  return {int(i), int(n)};
}

int64_t find_point(const SweepSpec& spec, const std::string& text) {
  int64_t i = -1;
  if (parse_count(text, i) && i < int64_t(spec.points.size())) return i;
  for (const auto& p : spec.points)
    if (p.name == text) return p.index;
  fail_config("--point: expected a point index 0..{} or a point name of {}, got '{}'",
              int64_t(spec.points.size()) - 1, spec.source, text);
}

std::vector<int64_t> selected_points(const SweepSpec& spec, const SweepOptions& opt) {
  RELPOS_CHECK_CONFIG(opt.shard_count >= 1 && opt.shard_index >= 0 && opt.shard_index < opt.shard_count,
                      "--shard: expected I/N with 0 <= I < N, got '{}/{}'", opt.shard_index, opt.shard_count);
  RELPOS_CHECK_CONFIG(opt.point < int64_t(spec.points.size()) && opt.point >= -1,
                      "--point: expected a point index 0..{}, got {}", int64_t(spec.points.size()) - 1, opt.point);
  RELPOS_CHECK_CONFIG(opt.point < 0 || opt.shard_count == 1, "--point and --shard: give one of them, not both");
  std::vector<int64_t> sel;
  for (const auto& p : spec.points)
    if (opt.point >= 0 ? p.index == opt.point : p.index % opt.shard_count == opt.shard_index) sel.push_back(p.index);
  return sel;
}

std::string sweep_index_name(const SweepOptions& opt) {
  if (opt.point >= 0) return fmt::format("sweep.point-{}.jsonl", opt.point);
  if (opt.shard_count > 1) return fmt::format("sweep.shard-{}-of-{}.jsonl", opt.shard_index, opt.shard_count);
  return "sweep.jsonl";
}

std::vector<std::string> sweep_index_files(const std::string& dir) {
  std::vector<std::string> out, more;
  std::error_code ec;
  if (fs::is_regular_file(fs::path(dir) / "sweep.jsonl", ec)) out.push_back((fs::path(dir) / "sweep.jsonl").string());
  if (!fs::is_directory(dir, ec)) return out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if ((starts_ends(n, "sweep.shard-", ".jsonl") || starts_ends(n, "sweep.point-", ".jsonl")) &&
        it->is_regular_file(ec))
      more.push_back(n);
  }
  std::sort(more.begin(), more.end());
  for (const auto& n : more) out.push_back((fs::path(dir) / n).string());
  return out;
}

std::vector<nlohmann::json> read_sweep_index(const std::string& dir) {
  struct Pick {
    nlohmann::json rec;
    bool done;
    double at;
    size_t file, line;
  };
  auto later = [](const Pick& a, const Pick& b) {  // a replaces b
    return std::tie(a.done, a.at, a.file, a.line) > std::tie(b.done, b.at, b.file, b.line);
  };
  std::map<std::string, Pick> by_name;
  const auto files = sweep_index_files(dir);
  for (size_t fi = 0; fi < files.size(); ++fi) {
    std::istringstream f(read_whole_file(files[fi], "sweep index", kMaxMetricsBytes));
    size_t li = 0;
    for (std::string line; std::getline(f, line); ++li) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {  // a line cut short by a crash
        continue;
      }
      if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) continue;
      const auto st = j.find("status");
      const auto fa = j.find("finished_at");
      Pick p{j, st != j.end() && *st == "done", fa != j.end() && fa->is_number() ? fa->get<double>() : 0.0, fi, li};
      const std::string name = j["name"].get<std::string>();
      auto it = by_name.find(name);
      if (it == by_name.end())
        by_name.emplace(name, std::move(p));
      else if (later(p, it->second))
        it->second = std::move(p);
    }
  }
  std::vector<nlohmann::json> out;
  for (auto& [n, p] : by_name) out.push_back(std::move(p.rec));
  auto index_of = [](const nlohmann::json& j) {
    const auto it = j.find("index");
    return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : std::numeric_limits<int64_t>::max();
  };
  std::stable_sort(out.begin(), out.end(), [&](const nlohmann::json& a, const nlohmann::json& b) {
    return index_of(a) < index_of(b);  // ties keep name order (by_name is sorted)
  });
  return out;
}

namespace {

// sweep.json: what the sweep is (for report.py), rewritten by every run of it.
void write_sweep_meta(const SweepSpec& spec, const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& p : spec.points) names.push_back(p.name);
  nlohmann::json meta = {{"spec", spec.source},
                         {"point_names", names},
                         {"grid_keys", spec.grid_keys},
                         {"recipes", spec.recipes},
                         {"eval_lengths", spec.eval_lengths},
                         {"eval_modes", spec.eval_modes},
                         {"points", int64_t(spec.points.size())}};
  write_atomically(fs::path(dir) / "sweep.json", meta.dump(2) + "\n");
}

// The final numbers of a point's run, from its metrics.jsonl (also right for a point whose
// training finished in an earlier run).
struct PointNumbers {
  double train_loss = NAN, val_loss = NAN;
  int64_t last_step = 0;
  nlohmann::json divergence = nullptr;  // the first first_divergence_step logged
};
PointNumbers point_numbers(const std::string& run_dir) {
  PointNumbers n;
  for (const auto& r : read_metrics(run_dir)) {
    if (r.contains("loss") && r["loss"].is_number()) n.train_loss = r["loss"].get<double>();
    if (r.contains("loss") && r["loss"].is_string()) n.train_loss = NAN;
    if (r.contains("val_loss") && r["val_loss"].is_number()) n.val_loss = r["val_loss"].get<double>();
    if (r.contains("first_divergence_step") && n.divergence.is_null()) n.divergence = r["first_divergence_step"];
    n.last_step = std::max<int64_t>(n.last_step, r.value("step", int64_t(0)));
  }
  return n;
}

// One row per point, one column per evaluation mode and length: L=128 (the first mode),
// s:L=128 (sliding).
std::string summary_table(const SweepSpec& spec, const std::vector<nlohmann::json>& records) {
  std::string t = fmt::format("{:<4} {:<44} {:>7} {:>10} {:>10} {:>6}", "#", "point", "status", "train", "val", "div");
  for (const auto& mode : spec.eval_modes)
    for (int64_t L : spec.eval_lengths)
      t += fmt::format(" {:>9}", fmt::format("{}L={}", mode == spec.eval_modes.front() ? "" : mode.substr(0, 1) + ":", L));
  t += "\n";
  auto f = [](const nlohmann::json& v) {
    return v.is_number() ? fmt::format("{:.4f}", v.get<double>()) : std::string("-");
  };
  for (const auto& r : records) {
    if (r.is_null()) continue;
    t += fmt::format("{:<4} {:<44} {:>7} {:>10} {:>10} {:>6}", r["index"].get<int64_t>(), r["name"].get<std::string>(),
                     r["status"].get<std::string>(), f(r["final_train_loss"]), f(r["final_val_loss"]),
                     r["first_divergence_step"].is_null() ? "-" : r["first_divergence_step"].dump());
    if (r.contains("eval"))
      for (const auto& e : r["eval"]) t += fmt::format(" {:>9}", f(e["loss"]));
    t += "\n";
  }
  // Each failed point's reason under the table (the table's row only says "failed").
  for (const auto& r : records)
    if (!r.is_null() && r.value("status", "") == "failed")
      t += fmt::format("failed: #{} {}: {}\n", r["index"].get<int64_t>(), r["name"].get<std::string>(),
                       r.contains("error") && r["error"].is_string() ? r["error"].get<std::string>()
                                                                      : std::string("(no reason recorded)"));
  return t;
}

// run_sweep in phases: the constructor writes sweep.json, reads what earlier runs finished and
// opens this process's index file; run() starts opt.jobs workers that take the selected points
// in order (skip a finished one, else run_point: train or resume it, evaluate it, append its
// record to the index).
class SweepRunner {
 public:
  SweepRunner(const SweepSpec& spec, const SweepOptions& opt);
  SweepResult run();

 private:
  void say(const std::string& s) const {
    if (opt_.log) opt_.log(s);
  }
  void worker();
  bool skip_if_done(const SweepPoint& pt);
  void run_point(const SweepPoint& pt);
  TrainOptions train_options(const SweepPoint& pt, const std::string& run_dir, const Config& cfg, nlohmann::json& rec);
  void record(const SweepPoint& pt, nlohmann::json rec, const std::string& status, const PointNumbers& n);
  void progress();  // under mu_

  const SweepSpec& spec_;
  const SweepOptions& opt_;
  const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  const std::string dir_;
  const std::vector<int64_t> sel_;
  std::map<std::string, nlohmann::json> done_;  // points finished by any earlier run, shard or point
  const std::string index_path_;
  std::ofstream index_;
  int jobs_ = 1, per_job_ = 1;
  std::mutex mu_;  // the index file, the log, the counters, records_
  SweepResult res_;
  std::vector<nlohmann::json> records_;
  std::atomic<size_t> next_{0};
  int64_t finished_ = 0;
  std::exception_ptr first_error_;
};

SweepRunner::SweepRunner(const SweepSpec& spec, const SweepOptions& opt)
    : spec_(spec),
      opt_(opt),
      dir_(opt.dir.empty() ? spec.dir : opt.dir),
      sel_(selected_points(spec, opt)),
      index_path_((fs::path(dir_) / sweep_index_name(opt)).string()),
      records_(spec.points.size()) {
  fs::create_directories(dir_);
  write_sweep_meta(spec_, dir_);
  for (auto& j : read_sweep_index(dir_))
    if (j.value("status", "") == "done") {
      const std::string name = j["name"].get<std::string>();
      done_[name] = std::move(j);
    }
  index_.open(index_path_, std::ios::app);
  RELPOS_CHECK(index_.good(), "sweep: cannot open '{}' for appending", index_path_);
  const int total_threads = opt_.threads > 0 ? opt_.threads : k::num_threads();
  jobs_ = std::max(1, std::min<int>(opt_.jobs, int(sel_.size())));
  per_job_ = std::max(1, total_threads / jobs_);
}

SweepResult SweepRunner::run() {
  const std::string share = opt_.point >= 0        ? fmt::format("point {} of {}", opt_.point, spec_.points.size())
                            : opt_.shard_count > 1 ? fmt::format("shard {}/{}: {} of {} points", opt_.shard_index,
                                                                 opt_.shard_count, sel_.size(), spec_.points.size())
                                                   : fmt::format("{} points", spec_.points.size());
  say(fmt::format("sweep: {} in {} ({} at a time, {} threads each), index {}", share, dir_, jobs_, per_job_,
                  sweep_index_name(opt_)));
  if (jobs_ == 1) {
    worker();
  } else {
    std::vector<std::thread> ts;
    for (int j = 0; j < jobs_; ++j) ts.emplace_back([this] { worker(); });
    for (auto& t : ts) t.join();
  }
  if (first_error_) std::rethrow_exception(first_error_);
  res_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  res_.records = records_;
  res_.index_file = index_path_;
  res_.summary = summary_table(spec_, records_);
  return res_;
}

void SweepRunner::worker() {
  k::set_num_threads(per_job_);  // OpenMP's thread count is per calling thread
  for (;;) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (first_error_) return;
    }
    const size_t k = next_.fetch_add(1);
    if (k >= sel_.size()) return;
    const SweepPoint& pt = spec_.points[size_t(sel_[k])];
    if (skip_if_done(pt)) continue;
    try {
      if (opt_.before_point) opt_.before_point(pt);
      run_point(pt);
    } catch (...) {
      std::lock_guard<std::mutex> l(mu_);
      if (!first_error_) first_error_ = std::current_exception();
      return;
    }
  }
}

bool SweepRunner::skip_if_done(const SweepPoint& pt) {
  std::lock_guard<std::mutex> l(mu_);
  const auto it = done_.find(pt.name);
  if (it == done_.end()) return false;
  records_[size_t(pt.index)] = it->second;
  records_[size_t(pt.index)]["index"] = pt.index;  // the spec may have grown since
  ++res_.skipped;
  ++finished_;
  say(fmt::format("[{}] already done, skipped", pt.name));
  return true;
}

// How the point trains: its log lines prefixed with its name; resumed from its last checkpoint
// (recorded in rec), or started again in its own directory when an earlier attempt stopped
// before its first checkpoint (Ctrl-C; the run-directory lock keeps out another process).
TrainOptions SweepRunner::train_options(const SweepPoint& pt, const std::string& run_dir, const Config& cfg,
                                        nlohmann::json& rec) {
  TrainOptions to;
  to.log = [this, name = pt.name](const std::string& s) {
    std::lock_guard<std::mutex> l(mu_);
    say(fmt::format("[{}] {}", name, s));
  };
  if (opt_.train_hook) to.after_backward = [this, pt](int64_t step, nn::Model&) { opt_.train_hook(pt, step); };
  int64_t ck_step = 0;
  if (auto ck = list_checkpoints(run_dir); !ck.empty()) ck_step = ck.back().first;
  if (ck_step > 0 && ck_step < cfg.train.steps) {
    to.resume = run_dir;
    rec["resumed_from"] = ck_step;
  } else if (ck_step == 0) {
    to.overwrite = true;
  }
  return to;
}

void SweepRunner::run_point(const SweepPoint& pt) {
  const std::string run_dir = dir_ + "/" + pt.dir_name;
  std::vector<std::string> ov = spec_.base_overrides;
  ov.insert(ov.end(), pt.overrides.begin(), pt.overrides.end());
  ov.push_back("output.dir=" + run_dir);
  if (jobs_ > 1 || opt_.threads > 0) ov.push_back(fmt::format("train.threads={}", per_job_));
  if (spec_.checkpoint_every > 0) ov.push_back(fmt::format("train.checkpoint_every={}", spec_.checkpoint_every));
  const Config cfg = parse_config(spec_.base_yaml, spec_.source + " (point " + pt.name + ")", ov);
  nlohmann::json grid = nlohmann::json::object();
  for (auto& [k, v] : pt.grid) grid[k] = v;
  nlohmann::json rec = {{"index", pt.index}, {"name", pt.name},     {"run_dir", run_dir},
                        {"grid", grid},      {"recipe", pt.recipe}, {"overrides", pt.overrides}};
  const auto p0 = std::chrono::steady_clock::now();
  const TrainOptions to = train_options(pt, run_dir, cfg, rec);
  std::string status = "done";
  const bool finished_before = !to.resume && !to.overwrite;  // its last checkpoint is at train.steps
  if (!finished_before) {
    try {
      train(cfg, to);
    } catch (const Error& e) {  // e.g. a non-finite loss with nan_policy abort: a result, not a crash
      // ...or no training at all (a run directory locked by another process, a device that is
      // not there, a config the point cannot run): the reason is in the record and printed.
      status = "failed";
      rec["error"] = e.what();
    }
  }
  const PointNumbers n = point_numbers(run_dir);
  if (status == "done" && !spec_.eval_lengths.empty()) rec["eval"] = evaluate_point(spec_, run_dir);
  rec["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
  record(pt, std::move(rec), status, n);
}

// Appends the point's record to this process's index file (a full disk is an error: the
// result would be lost silently) and reports it.
void SweepRunner::record(const SweepPoint& pt, nlohmann::json rec, const std::string& status, const PointNumbers& n) {
  rec["status"] = status;
  rec["steps"] = n.last_step;
  rec["final_train_loss"] = num_or_null(n.train_loss);
  rec["final_val_loss"] = num_or_null(n.val_loss);
  rec["first_divergence_step"] = n.divergence;
  rec["finished_at"] =
      double(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count()) /
      1e3;
  std::lock_guard<std::mutex> l(mu_);
  index_ << rec.dump() << "\n";
  index_.flush();
  if (!index_.good())
    fail("sweep: cannot append point '{}' to the index {}: {}", pt.name, index_path_, std::strerror(errno));
  records_[size_t(pt.index)] = rec;
  ++res_.ran;
  if (status == "failed") ++res_.failed;
  ++finished_;
  if (status == "failed")  // the reason first: a point that never trained has no losses to show
    say(fmt::format("[{}] failed: {} ({:.1f} s)", pt.name, rec.value("error", std::string("(no reason recorded)")),
                    rec["seconds"].get<double>()));
  else
    say(fmt::format("[{}] {}: train loss {:.4f}, val loss {:.4f}{} ({:.1f} s)", pt.name, status, n.train_loss,
                    n.val_loss,
                    n.divergence.is_null() ? "" : fmt::format(", first divergence at step {}", n.divergence.dump()),
                    rec["seconds"].get<double>()));
  progress();
}

void SweepRunner::progress() {
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const int64_t ran = res_.ran;
  const int64_t left = int64_t(sel_.size()) - finished_;
  const double eta = ran > 0 ? el / double(ran) * double(left) / double(jobs_) : 0.0;
  say(fmt::format("sweep: {}/{} points finished ({} skipped), {:.0f} s elapsed{}", finished_, sel_.size(), res_.skipped,
                  el, ran > 0 && left > 0 ? fmt::format(", ETA {:.0f} s", eta) : ""));
}

}  // namespace

SweepResult run_sweep(const SweepSpec& spec, const SweepOptions& opt) {
  return SweepRunner(spec, opt).run();
}

}  // namespace relpos::train
