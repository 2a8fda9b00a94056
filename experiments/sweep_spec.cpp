// experiments/sweep_spec.cpp — a sweep spec (sweep.h) read through two key tables, the
// spec's own keys and those of its `eval:` mapping: one row per key (name, type, default, meaning,
// reader), so what a spec may hold, how each key is checked and what the docs say about it
// (`relpos list --sweep --markdown`, docs/experiments.md) are one table. Rows are read in table
// order (the grid before `seeds`, which extends it, and before `points`, which refer to it).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>

#include "nn/positional/params.h"
#include "trainers/config.h"
#include "trainers/data/data.h"
#include "trainers/data/data_tasks.h"
#include "experiments/sweep.h"
#include "trainers/io/file_io.h"
#include "trainers/limits.h"

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

// What the key readers fill: the spec, and the grid values and recipes that become its points once
// every key is read.
struct SpecDraft {
  SweepSpec& s;
  std::vector<std::vector<std::string>> values;  // per grid key, its values (YAML scalar text)
  std::vector<Recipe> recipes;
};

// One key of a spec mapping: its docs row and its reader (called only when the key is present).
struct SpecKey {
  std::string name, type, def, meaning;
  void (*read)(const SpecReader&, const YAML::Node&, SpecDraft&);
};

std::vector<std::string> key_names(const std::vector<SpecKey>& keys) {
  std::vector<std::string> out;
  for (const auto& k : keys) out.push_back(k.name);
  return out;
}

// Every key of `keys` present in `map`, read in table order (unknown keys refused with a hint).
void read_keys(const SpecReader& r, const YAML::Node& map, const std::string& where, const std::vector<SpecKey>& keys,
               SpecDraft& d) {
  r.known_keys(map, where, key_names(keys));
  for (const auto& k : keys)
    if (const YAML::Node n = map[k.name]) k.read(r, n, d);
}

void read_eval_mode(const SpecReader& r, const YAML::Node& m, SpecDraft& d) {  // one mode or a list of them
  std::vector<std::string>& modes = d.s.eval_modes;
  modes.clear();
  if (m.IsSequence()) {
    for (const auto& v : m) modes.push_back(r.scalar(v, "eval.mode"));
    if (modes.empty())
      r.bad(m, "eval.mode", "an empty list; expected random, windows, sliding or examples, or a list of them");
  } else {
    modes.push_back(r.scalar(m, "eval.mode"));
  }
  std::set<std::string> seen;
  for (const auto& mode : modes) {
    if (mode != "random" && mode != "windows" && mode != "sliding" && mode != "examples")
      r.bad(m, "eval.mode",
            fmt::format("'{}': expected random, windows, sliding or examples, or a list of them", mode));
    if (!seen.insert(mode).second) r.bad(m, "eval.mode", fmt::format("'{}' is listed twice", mode));
  }
}

const std::vector<SpecKey>& eval_keys() {
  static const std::vector<SpecKey> keys = {
      {"lengths", fmt::format("list of ints in [1, 2^{}]", std::countr_zero(uint64_t(kMaxLen))), "`[]`",
       "after training, evaluate each point at these lengths (`relpos eval`'s per-position protocol)",
       [](const SpecReader& r, const YAML::Node& l, SpecDraft& d) {
         if (!l.IsSequence())
           r.bad(l, "eval.lengths", fmt::format("expected a list of lengths, e.g. [64, 128], got '{}'", yaml_text(l)));
         for (const auto& v : l) d.s.eval_lengths.push_back(r.integer(v, "eval.lengths", 1, kMaxLen));
       }},
      {"mode", "`random` \\| `windows` \\| `sliding` \\| `examples`, or a list of them", "`windows`",
       "evaluation protocol; with a list (`[windows, sliding]`) every length is evaluated in every mode, and the "
       "report draws one figure per mode (synthetic and labelling tasks use `random`, or with `examples` every "
       "validation example once: `token_labels`, whose report adds a held-out accuracy table and figure)",
       read_eval_mode},
      {"val_paths", "list of token files", "none",
       "one per `lengths` entry: length i is evaluated on that validation file instead of `data.val_path` (same "
       "vocabulary; e.g. the digits at 8x8, 12x12, 16x16); each is opened before anything runs and named in its "
       "record",
       [](const SpecReader& r, const YAML::Node& v, SpecDraft& d) {
         if (!v.IsSequence())
           r.bad(v, "eval.val_paths", fmt::format("expected a list of token files, got '{}'", yaml_text(v)));
         for (const auto& p : v) d.s.eval_val_paths.push_back(r.scalar(p, "eval.val_paths"));
       }},
      {"stride", fmt::format("int in [1, 2^{}]", std::countr_zero(uint64_t(kMaxLen))), "half the length",
       "`sliding`: tokens scored per window after the first; at most every length",
       [](const SpecReader& r, const YAML::Node& n, SpecDraft& d) { d.s.eval_stride = r.integer(n, "eval.stride", 1, kMaxLen); }},
      {"bucket", fmt::format("int in [1, 2^{}]", std::countr_zero(uint64_t(kMaxLen))), "the training length",
       "width of the position buckets of the per-position losses",
       [](const SpecReader& r, const YAML::Node& n, SpecDraft& d) { d.s.eval_bucket = r.integer(n, "eval.bucket", 1, kMaxLen); }},
      {"max_tokens", fmt::format("int in [1, 2^{}]", std::countr_zero(uint64_t(kMaxRepeat))), "eval_batches · batch_size · training length",
       "`windows`, `sliding`: score at most this many tokens per length",
       [](const SpecReader& r, const YAML::Node& n, SpecDraft& d) {
         d.s.eval_max_tokens = r.integer(n, "eval.max_tokens", 1, kMaxRepeat);
       }},
      {"subset_channel", "a name of `data.position_channels`", "—",
       "`random`: also the loss on the targets whose channel (counting tokens back, e.g. the code domain's `parent`) "
       "is >= `subset_min` and points inside the window (`relpos eval --subset-channel`); recorded as "
       "`subset_loss`, reported beside the loss",
       [](const SpecReader& r, const YAML::Node& n, SpecDraft& d) {
         d.s.eval_subset_channel = r.scalar(n, "eval.subset_channel");
       }},
      {"subset_min", fmt::format("int in [1, 2^{}]", std::countr_zero(uint64_t(kMaxLen))), "8",
       "the smallest channel value in the subset",
       [](const SpecReader& r, const YAML::Node& n, SpecDraft& d) {
         d.s.eval_subset_min = r.integer(n, "eval.subset_min", 1, kMaxLen);
       }},
  };
  return keys;
}

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

// grid: key -> value or list of values (cartesian product in key order, the last key fastest)
void read_grid(const SpecReader& r, const YAML::Node& g, SpecDraft& d) {
  if (!g.IsMap()) r.bad(g, "grid", "expected a mapping key -> list of values");
  for (const auto& kv : g) {
    d.s.grid_keys.push_back(r.scalar(kv.first, "grid key"));
    std::vector<std::string> vs;
    if (kv.second.IsSequence())
      for (const auto& v : kv.second) vs.push_back(yaml_text(v));
    else
      vs.push_back(yaml_text(kv.second));
    if (vs.empty()) r.bad(kv.second, "grid." + d.s.grid_keys.back(), "has no values");
    d.values.push_back(vs);
  }
}

// seeds: N = the innermost grid key train.seed: [1 .. N]
void read_seeds(const SpecReader& r, const YAML::Node& n, SpecDraft& d) {
  const int64_t seeds = r.integer(n, "seeds", 1, kMaxSeeds);
  if (std::find(d.s.grid_keys.begin(), d.s.grid_keys.end(), kSeedKey) != d.s.grid_keys.end())
    r.bad(n, "seeds", fmt::format("the grid already has {}; give either seeds: N or a {} grid", kSeedKey, kSeedKey));
  d.s.grid_keys.push_back(kSeedKey);
  d.values.emplace_back();
  for (int64_t i = 1; i <= seeds; ++i) d.values.back().push_back(std::to_string(i));
}

const std::vector<SpecKey>& spec_keys() {
  static const std::vector<SpecKey> keys = {
      {"base", "path", "—", "base config file, relative to the spec (either `base` or `config` is required)",
       [](const SpecReader& r, const YAML::Node& n, SpecDraft& d) {
         d.s.base_yaml = read_file(fs::path(r.path).parent_path() / r.scalar(n, "base"));
       }},
      {"config", "mapping", "—", "an inline config, applied over `base` key by key (like `--set`)",
       [](const SpecReader& r, const YAML::Node& c, SpecDraft& d) {
         if (!c.IsMap())
           r.bad(c, "config",
                 fmt::format("expected a mapping of config keys (e.g. {{train: {{steps: 100}}}}), got '{}'", yaml_text(c)));
         flatten(c, "", d.s.base_overrides);
       }},
      {"dir", "path", "`runs/sweeps/<spec stem>`", "sweep directory (`--dir` overrides it): `sweep.json`, the index files (`sweep.jsonl`, "
       "`sweep.shard-I-of-N.jsonl`, `sweep.point-I.jsonl`), one run directory per point",
       [](const SpecReader& r, const YAML::Node& n, SpecDraft& d) { d.s.dir = r.scalar(n, "dir"); }},
      {"checkpoint_every", fmt::format("int in [0, 2^{}]", std::countr_zero(uint64_t(kMaxRepeat))), "the base config's", "`train.checkpoint_every` of every point (how far an interrupted point resumes from)",
       [](const SpecReader& r, const YAML::Node& n, SpecDraft& d) {
         d.s.checkpoint_every = r.integer(n, "checkpoint_every", 0, kMaxRepeat);
       }},
      {"eval", "mapping (the `eval:` table)", "none", "after training, evaluate every point (`relpos eval`'s protocols)",
       [](const SpecReader& r, const YAML::Node& e, SpecDraft& d) {
         read_keys(r, e, "eval", eval_keys(), d);
         const SweepSpec& s = d.s;
         if (!s.eval_val_paths.empty() && s.eval_val_paths.size() != s.eval_lengths.size())
           r.bad(e["val_paths"], "eval.val_paths",
                 fmt::format("lists {} files for {} eval.lengths; give one validation file per length",
                             s.eval_val_paths.size(), s.eval_lengths.size()));
         if (std::count(s.eval_modes.begin(), s.eval_modes.end(), "sliding") && s.eval_stride > 0)
           for (int64_t L : s.eval_lengths)
             RELPOS_CHECK_CONFIG(s.eval_stride <= L,
                                 "{}: eval.stride {} must not exceed every eval length (got length {})", r.path,
                                 s.eval_stride, L);
       }},
      {"grid", "mapping dotted key → list", "none",
       "cartesian product of overrides, in key order (the last key varies fastest); a single value stands for a "
       "one-value list",
       read_grid},
      {"seeds", fmt::format("int in [1, {}]", kMaxSeeds), "none",
       "run every point with `train.seed` = 1, 2, …, N (the innermost grid key `train.seed`; a `train.seed` grid "
       "picks other seeds, not both). `relpos report` then shows each point as the mean over its seeds ± the "
       "half-width of a 95% Student-t interval, draws the interval as a band, and ranks points only where "
       "intervals separate",
       read_seeds},
      {"points", "list of `{name, set: {dotted key: value}, only: {grid key: value or list}}`", "none",
       "named override sets (recipes), crossed with the grid (innermost); `only` runs a recipe with the listed "
       "values of those grid keys alone (e.g. a bias-scale recipe `only: {model.position.type: [t5, alibi]}`, where "
       "RoPE would refuse it); each key must be a grid key and each value one of its grid values; a recipe may not "
       "set a grid key",
       [](const SpecReader& r, const YAML::Node& p, SpecDraft& d) {
         d.recipes = read_points(r, p, d.s.grid_keys, d.values);
       }},
  };
  return keys;
}

std::string markdown_table(const std::vector<SpecKey>& keys) {
  std::string t = "| key | type | default | meaning |\n|---|---|---|---|\n";
  for (const auto& k : keys) t += fmt::format("| `{}` | {} | {} | {} |\n", k.name, k.type, k.def, k.meaning);
  return t;
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

std::string sweep_spec_markdown(const std::string& table) {
  RELPOS_CHECK(table == "spec" || table == "eval", "sweep_spec_markdown: no table '{}' (spec, eval)", table);
  return markdown_table(table == "spec" ? spec_keys() : eval_keys());
}

namespace {
// eval.mode examples needs labelled examples; each eval.val_paths file must be a validation split
// the point's data accepts (opened, its channels and grids checked).
void check_eval_data(const SweepSpec& s, const Config& c, const std::string& where) {
  if (std::count(s.eval_modes.begin(), s.eval_modes.end(), "examples"))
    RELPOS_CHECK_CONFIG(find_data_task(c.data.task).val_file && !find_data_task(c.data.task).text &&
                            find_data_task(c.data.task).labels_each_token,
                        "{}: eval.mode examples (every validation example once) needs data.task token_labels, "
                        "not '{}'",
                        where, c.data.task);
  for (const std::string& vp : s.eval_val_paths) {
    Config cv = c;
    cv.data.val_path = vp;
    try {
      (void)make_dataset(cv);
    } catch (const Error& e) {
      fail_config("{}: eval.val_paths '{}': {}", where, vp, e.what());
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
  if (!root.IsMap()) fail_config("{}: a sweep spec is a mapping ({})", path, fmt::join(key_names(spec_keys()), ", "));
  RELPOS_CHECK_CONFIG(root["base"] || root["config"], "{}: a sweep needs 'base' (a config file) or 'config'", path);
  SpecDraft d{s, {}, {}};
  read_keys(r, root, "", spec_keys(), d);
  if (s.dir.empty()) s.dir = "runs/sweeps/" + fs::path(path).stem().string();
  for (const auto& rc : d.recipes) s.recipes.push_back(rc.name);
  if (d.recipes.empty()) d.recipes.push_back({});
  // The size first: a grid too large is refused before any point is expanded or validated.
  // (the product stops growing once past the limit: no overflow; max_points <= kMaxSweepPoints)
  int64_t total = 0;
  for (const auto& rc : d.recipes) total = std::min(total + rc.combinations(d.values, max_points), max_points + 1);
  RELPOS_CHECK_CONFIG(total <= max_points, "{}: the sweep has {} points (grid x points), more than the limit of {}; "
                      "pass --max-points N to raise it", path, total, max_points);
  expand_points(d.values, d.recipes, s);
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
    check_eval_data(s, c, where);
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

}  // namespace relpos::train
