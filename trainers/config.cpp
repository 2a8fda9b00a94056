// trainers/config.cpp — YAML -> Config. A Section reads one mapping (typed getters that check type
// and range and remember the keys read); one table of Keys per section (model_keys(), ...)
// says what each key is and reads it; finish() rejects the keys no table names.
#include "trainers/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "autograd/grad_mode.h"
#include "nn/positional/params.h"
#include "nn/positional/registry.h"
#include "trainers/data/data_tasks.h"
#include "trainers/data/token_file.h"
#include "trainers/io/file_io.h"
#include "trainers/limits.h"

namespace relpos::train {

namespace {

struct Ctx {
  std::string source;
  std::map<std::string, std::string> overridden;  // dotted key -> "--set k=v"
};

std::string where(const Ctx& c, const YAML::Node& n, const std::string& key) {
  auto it = c.overridden.find(key);
  if (it != c.overridden.end()) return it->second;
  if (n.IsDefined() && n.Mark().line >= 0)
    return fmt::format("{}:{}:{}", c.source, n.Mark().line + 1, n.Mark().column + 1);
  return c.source;
}

// A mapping key as a string; complex keys (lists, mappings) are config errors.
std::string scalar_key(const Ctx& c, const YAML::Node& k, const std::string& section) {
  if (!k.IsScalar())
    fail_config("{}: a key in '{}' is a {}, expected a plain name", where(c, k, section), section.empty() ? "(top level)" : section,
                k.IsMap() ? "mapping" : k.IsSequence() ? "list" : "null");
  return k.Scalar();
}

// yaml-cpp keeps every pair of a mapping and reads the first of duplicate keys: reject them
// (anywhere in the document), naming both places. Depth is bounded by the YAML parser.
void reject_duplicate_keys(const Ctx& c, const YAML::Node& n, const std::string& path, int depth = 0) {
  if (depth > 64) fail_config("{}: the config nests deeper than 64 levels", c.source);
  if (n.IsMap()) {
    std::map<std::string, YAML::Mark> seen;
    for (const auto& kv : n) {
      std::string k = scalar_key(c, kv.first, path);
      std::string full = path.empty() ? k : path + "." + k;
      auto [it, fresh] = seen.emplace(k, kv.first.Mark());
      if (!fresh)
        fail_config("{}: duplicate key '{}' (first at line {})", where(c, kv.first, full), full, it->second.line + 1);
      reject_duplicate_keys(c, kv.second, full, depth + 1);
    }
  } else if (n.IsSequence()) {
    for (const auto& e : n) reject_duplicate_keys(c, e, path, depth + 1);
  }
}

class Section {
 public:
  Section(const Ctx& ctx, YAML::Node node, std::string prefix) : ctx_(ctx), node_(node), prefix_(std::move(prefix)) {
    if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap())
      fail_config("{}: '{}' must be a mapping of keys", where(ctx_, node_, prefix_), prefix_);
  }
  std::string key(const std::string& k) const { return prefix_.empty() ? k : prefix_ + "." + k; }
  YAML::Node raw(const std::string& k) {
    used_.insert(k);
    return node_.IsMap() ? node_[k] : YAML::Node();
  }
  bool has(const std::string& k) const { return node_.IsMap() && node_[k].IsDefined() && !node_[k].IsNull(); }

  template <typename T>
  T get(const std::string& k, T def, const char* expect) {
    YAML::Node n = raw(k);
    if (!n.IsDefined() || n.IsNull()) return def;
    if (!n.IsScalar()) fail_config("{}: {}: expected {}, got a {}", where(ctx_, n, key(k)), key(k), expect, n.IsMap() ? "mapping" : "list");
    try {
      if constexpr (std::is_same_v<T, bool>) {
        std::string s = n.Scalar();
        if (s == "true" || s == "yes" || s == "on") return true;
        if (s == "false" || s == "no" || s == "off") return false;
        throw YAML::BadConversion(n.Mark());
      } else {
        return n.as<T>();
      }
    } catch (const YAML::BadConversion&) {
      fail_config("{}: {}: expected {}, got '{}'", where(ctx_, n, key(k)), key(k), expect, n.Scalar());
    }
  }
  int64_t get_int(const std::string& k, int64_t def, int64_t lo, int64_t hi = INT64_MAX) {
    int64_t v = get<int64_t>(k, def, "an integer");
    if (v < lo || v > hi)
      fail_config("{}: {}: {} is out of range (expected {} <= value{})", where(ctx_, raw(k), key(k)), key(k), v, lo,
                  hi == INT64_MAX ? "" : fmt::format(" <= {}", hi));
    return v;
  }
  double get_double(const std::string& k, double def, double lo, double hi, bool lo_open = false) {
    double v = get<double>(k, def, "a number");
    if (!std::isfinite(v))
      fail_config("{}: {}: {} is not a finite number", where(ctx_, raw(k), key(k)), key(k), raw(k).Scalar());
    if (!(lo_open ? v > lo : v >= lo) || !(v <= hi))
      fail_config("{}: {}: {} is out of range (expected {} {} value <= {})", where(ctx_, raw(k), key(k)), key(k), v, lo,
                  lo_open ? "<" : "<=", hi);
    return v;
  }
  std::string get_choice(const std::string& k, const std::string& def, const std::vector<std::string>& choices) {
    std::string v = get<std::string>(k, def, "a string");
    if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
      std::string hint = nn::did_you_mean(v, choices);
      fail_config("{}: {}: '{}' is not one of {}{}", where(ctx_, raw(k), key(k)), key(k), v, fmt::join(choices, ", "),
                  hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint));
    }
    return v;
  }
  std::vector<std::string> get_list(const std::string& k, std::vector<std::string> def) {
    YAML::Node n = raw(k);
    if (!n.IsDefined() || n.IsNull()) return def;
    if (!n.IsSequence()) fail_config("{}: {}: expected a list of strings", where(ctx_, n, key(k)), key(k));
    std::vector<std::string> out;
    for (const auto& e : n) {
      if (!e.IsScalar()) fail_config("{}: {}: expected a list of strings, got a nested {}", where(ctx_, e, key(k)), key(k),
                                     e.IsMap() ? "mapping" : "list");
      out.push_back(e.Scalar());
    }
    return out;
  }
  // The sub-mapping `k` (one Section per key: its used keys are remembered for finish()).
  Section& child(const std::string& k) {
    auto it = children_.find(k);
    if (it == children_.end()) it = children_.emplace(k, std::make_unique<Section>(ctx_, raw(k), key(k))).first;
    return *it->second;
  }
  // Keys of this mapping that no getter read.
  void finish(const std::vector<std::string>& known) {
    if (!node_.IsMap()) return;
    for (const auto& kv : node_) {
      std::string k = scalar_key(ctx_, kv.first, prefix_);
      if (used_.count(k)) continue;
      std::string hint = nn::did_you_mean(k, known);
      fail_config("{}: unknown key '{}'{}; expected one of: {}", where(ctx_, kv.first, key(k)), key(k),
                  hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint), fmt::join(known, ", "));
    }
  }
  const YAML::Node& node() const { return node_; }
  const Ctx& ctx() const { return ctx_; }

 private:
  const Ctx& ctx_;
  YAML::Node node_;
  std::string prefix_;
  std::set<std::string> used_;
  std::map<std::string, std::unique_ptr<Section>> children_;
};

void apply_override(YAML::Node& root, const std::string& spec, Ctx& ctx) {
  auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0)
    fail_config("--set '{}': expected key=value, e.g. --set model.n_layers=4", spec);
  std::string key = spec.substr(0, eq), value = spec.substr(eq + 1);
  if (value.find_first_not_of(" \t") == std::string::npos)
    fail_config("--set '{}': the value is empty (write the value after '=', e.g. --set {}=VALUE)", spec, key);
  if (size_t bad = utf8_error_offset(spec); bad != std::string::npos)
    fail_config("--set: invalid UTF-8 at byte offset {} of the argument", bad);
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string p; std::getline(ss, p, '.');) {
    if (p.empty()) fail_config("--set '{}': empty component in key '{}'", spec, key);
    parts.push_back(p);
  }
  YAML::Node cur = root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = cur[parts[i]];
    if (!next.IsDefined() || next.IsNull()) {
      cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next = cur[parts[i]];
    } else if (!next.IsMap()) {
      fail_config("--set '{}': '{}' is not a section", spec, parts[i]);
    }
    cur.reset(next);
  }
  YAML::Node v;
  try {
    v = YAML::Load(value);
  } catch (const YAML::Exception& e) {
    fail_config("--set '{}': value is not valid YAML: {}", spec, e.msg);
  }
  reject_duplicate_keys(ctx, v, key);
  cur[parts.back()] = v;
  ctx.overridden[key] = "--set " + spec;
}

// model.position: `type`, `shared` and the encoding's own parameters (validated against its
// schema in nn/positional/, which also documents them: docs/config.md's parameter table).
void read_position(Section& model, nn::ModelConfig& m) {
  Section& p = model.child("position");
  std::vector<std::string> names;
  for (const auto& v : nn::position_variants()) names.push_back(v.name);
  m.position = p.get_choice("type", m.position, names);
  if (p.has("shared")) m.position_shared = p.get<bool>("shared", true, "true or false");
  std::map<std::string, std::string> params;
  if (p.node().IsMap())
    for (const auto& kv : p.node()) {
      std::string k = scalar_key(Ctx{}, kv.first, "model.position");
      if (k == "type" || k == "shared") continue;
      if (k == "distance") {
        if (!kv.second.IsScalar()) fail_config("model.position.distance: expected a scalar value");
        const std::string d = kv.second.Scalar();
        const bool name_ok = !d.empty() && d.size() < 32 && std::all_of(d.begin(), d.end(), [](char ch) {
          return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
        });
        if (!name_ok)
          fail_config(
              "{}: model.position.distance: expected 'index' or the name of a position channel (a-z 0-9 _), "
              "got '{}'",
              where(p.ctx(), kv.second, "model.position.distance"), d);
        m.position_distance = d;
        continue;
      }
      if (!kv.second.IsScalar()) fail_config("model.position.{}: expected a scalar value", k);
      std::string v = kv.second.Scalar();
      std::string lower = v;
      for (char& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
      for (const char* nf : {".nan", ".inf", "+.inf", "-.inf", "nan", "inf", "+inf", "-inf", "infinity", "-infinity"})
        if (lower == nf)
          fail_config("{}: model.position.{}: '{}' is not a finite number",
                      where(p.ctx(), kv.second, "model.position." + k), k, v);
      // Keys that set table rows, times the width of a row, bound what building the
      // encoding allocates (checked before it is built).
      const nn::PositionVariant& variant = m.position.variant();
      if (const nn::ParamSpec* spec = variant.param(k); spec && spec->table_rows) {
        const std::string at = where(p.ctx(), kv.second, "model.position." + k);
        int64_t rows = 0;
        try {
          rows = nn::PositionParams(std::map<std::string, std::string>{{k, v}})
                     .bind(variant.params, "position '" + variant.name + "'")
                     .get_int(k);
        } catch (const ConfigError& e) {
          fail_config("{}: model.position: {}", at, e.what());
        }
        if (rows > 0 && rows > (int64_t(1) << 28) / m.d_model)
          fail_config(
              "{}: model.position.{} ({}) x model.d_model ({}) is too large for a position table (at most "
              "2^28 entries)",
              at, k, rows, m.d_model);
      }
      params[k] = v;
      p.raw(k);
    }
  m.position_params = nn::PositionParams(params);
}

// ---- The schema: one table per section --------------------------------------------------
// A Key reads one entry of a section into the section's struct S and documents it. Its path
// is relative to the section ("bias_scale.enabled" is key `enabled` of the mapping
// `bias_scale`). Defaults are S's member initialisers (config.h, nn/models.h): a reader
// leaves the member as it is when the key is absent, and the docs print S{}'s value.

template <typename S>
struct Key {
  std::string path;
  std::vector<ConfigKeyDoc> docs;
  std::function<void(Section& s, const std::string& leaf, S& out)> read;
};

template <typename S, typename T>
using At = std::function<T&(S&)>;  // the member a key sets

template <typename S, typename T>
At<S, T> at(T S::*m) {
  return [m](S& s) -> T& { return s.*m; };
}
template <typename S, typename A, typename T>
At<S, T> at(A S::*a, T A::*m) {
  return [a, m](S& s) -> T& { return (s.*a).*m; };
}

template <typename S, typename T>
T default_of(const At<S, T>& get) {
  S s{};
  return get(s);
}

// A bound as the docs print it: powers of two from 2^20 as 2^k.
std::string bound(int64_t v) {
  if (v >= (int64_t(1) << 20) && (v & (v - 1)) == 0) return fmt::format("2^{}", std::countr_zero(uint64_t(v)));
  return fmt::format("{}", v);
}

template <typename S, typename T>
Key<S> integer(std::string path, At<S, T> get, int64_t lo, int64_t hi, std::string meaning,
               std::string computed_default = "", std::function<void(S&)> when_absent = {}) {
  std::string type =
      hi == INT64_MAX ? fmt::format("int ≥ {}", bound(lo)) : fmt::format("int in [{}, {}]", bound(lo), bound(hi));
  std::string def = computed_default.empty() ? fmt::format("{}", default_of(get)) : computed_default;
  return {path,
          {{path, type, def, std::move(meaning)}},
          [get, lo, hi, when_absent](Section& s, const std::string& leaf, S& out) {
            if (!s.has(leaf) && when_absent) {
              s.raw(leaf);
              when_absent(out);
              return;
            }
            get(out) = T(s.get_int(leaf, int64_t(get(out)), lo, hi));
          }};
}

enum class Lower { Closed, Open };

template <typename S>
Key<S> real(std::string path, At<S, double> get, double lo, double hi, std::string meaning,
            Lower lower = Lower::Closed) {
  std::string type = fmt::format("{:g} {} x ≤ {:g}", lo, lower == Lower::Open ? "<" : "≤", hi);
  return {path,
          {{path, type, fmt::format("{:g}", default_of(get)), std::move(meaning)}},
          [get, lo, hi, lower](Section& s, const std::string& leaf, S& out) {
            get(out) = s.get_double(leaf, get(out), lo, hi, lower == Lower::Open);
          }};
}

template <typename S>
Key<S> flag(std::string path, At<S, bool> get, std::string meaning) {
  return {
      path,
      {{path, "bool", default_of(get) ? "true" : "false", std::move(meaning)}},
      [get](Section& s, const std::string& leaf, S& out) { get(out) = s.get<bool>(leaf, get(out), "true or false"); }};
}

std::string choice_type(const std::vector<std::string>& names) {
  std::string t;
  for (const auto& n : names) t += (t.empty() ? "`" : " \\| `") + n + "`";
  return t;
}

// A closed choice: an enum with an EnumTable.
template <typename S, typename E>
Key<S> choice(std::string path, At<S, E> get, std::string meaning) {
  return {path,
          {{path, choice_type(enum_names<E>()), fmt::format("`{}`", enum_name(default_of(get))), std::move(meaning)}},
          [get](Section& s, const std::string& leaf, S& out) {
            get(out) = *parse_enum<E>(s.get_choice(leaf, std::string(enum_name(get(out))), enum_names<E>()));
          }};
}

// A name from a registry (data tasks): a string checked against the registry's names.
template <typename S>
Key<S> registry_name(std::string path, At<S, std::string> get, std::vector<std::string> (*names)(),
                     std::string meaning) {
  return {
      path,
      {{path, choice_type(names()), fmt::format("`{}`", default_of(get)), std::move(meaning)}},
      [get, names](Section& s, const std::string& leaf, S& out) { get(out) = s.get_choice(leaf, get(out), names()); }};
}

// A non-empty string without NUL bytes (a path).
template <typename S>
Key<S> text(std::string path, At<S, std::string> get, std::string what, std::string meaning) {
  return {path,
          {{path, what, fmt::format("`{}`", default_of(get)), std::move(meaning)}},
          [get, what](Section& s, const std::string& leaf, S& out) {
            std::string v = s.get<std::string>(leaf, get(out), "a string");
            if (v.empty() || v.find('\0') != std::string::npos)
              fail_config("{}: {}: expected a non-empty {}", where(s.ctx(), s.raw(leaf), s.key(leaf)), s.key(leaf),
                          what);
            get(out) = v;
          }};
}

// A string without NUL bytes that may be empty (an optional path).
template <typename S>
Key<S> optional_text(std::string path, At<S, std::string> get, std::string what, std::string meaning) {
  return {path,
          {{path, what + " or empty", default_of(get).empty() ? "`\"\"`" : fmt::format("`{}`", default_of(get)),
            std::move(meaning)}},
          [get, what](Section& s, const std::string& leaf, S& out) {
            std::string v = s.get<std::string>(leaf, get(out), "a string");
            if (v.find('\0') != std::string::npos)
              fail_config("{}: {}: expected a {} without NUL bytes", where(s.ctx(), s.raw(leaf), s.key(leaf)),
                          s.key(leaf), what);
            get(out) = v;
          }};
}

// A list of names drawn from `names`.
template <typename S>
Key<S> name_list(std::string path, At<S, std::vector<std::string>> get, std::vector<std::string> names,
                 std::string meaning) {
  return {path,
          {{path, "list of " + choice_type(names), fmt::format("[{}]", fmt::join(default_of(get), ", ")),
            std::move(meaning)}},
          [get, names](Section& s, const std::string& leaf, S& out) {
            std::vector<std::string> v = s.get_list(leaf, get(out));
            for (const auto& g : v)
              if (std::find(names.begin(), names.end(), g) == names.end()) {
                std::string hint = nn::did_you_mean(g, names);
                fail_config("{}: {}: '{}' is not one of {}{}", where(s.ctx(), s.raw(leaf), s.key(leaf)), s.key(leaf), g,
                            fmt::join(names, ", "), hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint));
              }
            get(out) = v;
          }};
}

// A list of distinct names chosen by the data (token-file channel names): each non-empty, at most 64
// bytes of letters, digits, '_', '.' and '-' (the token file's own name rule is checked on the file).
template <typename S>
Key<S> free_names(std::string path, At<S, std::vector<std::string>> get, size_t most, std::string meaning) {
  return {path,
          {{path, fmt::format("list of at most {} names", most), "`[]`", std::move(meaning)}},
          [get, most](Section& s, const std::string& leaf, S& out) {
            std::vector<std::string> v = s.get_list(leaf, get(out));
            const std::string at = where(s.ctx(), s.raw(leaf), s.key(leaf));
            if (v.size() > most) fail_config("{}: {}: at most {} names, got {}", at, s.key(leaf), most, v.size());
            for (size_t i = 0; i < v.size(); ++i) {
              const bool ok = !v[i].empty() && v[i].size() <= 64 && std::all_of(v[i].begin(), v[i].end(), [](char ch) {
                return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '-';
              });
              if (!ok)
                fail_config("{}: {}: entry {} is not a name (1-64 letters, digits, '_', '.', '-'; {} bytes given)", at,
                            s.key(leaf), i, v[i].size());
              for (size_t j = 0; j < i; ++j)
                if (v[j] == v[i]) fail_config("{}: {}: '{}' is listed twice", at, s.key(leaf), v[i]);
            }
            get(out) = v;
          }};
}

using nn::AttnStability;
using nn::BiasScaleConfig;
// position.shared's default as the docs print it: the registry's per-layer encodings.
std::string per_layer_default() {
  std::vector<std::string> names;
  for (const auto& v : nn::position_variants())
    if (v.per_layer) names.push_back("`" + v.name + "`");
  return fmt::format("true (false for {})", fmt::join(names, ", "));
}

// model.attention's meaning, with the encodings on each path named from the registry
// (PositionVariant::fused_attention).
std::string attention_doc() {
  std::vector<std::string> fused, reference;
  for (const auto& v : nn::position_variants()) (v.fused_attention ? fused : reference).push_back(v.name);
  return fmt::format(
      "`fused`: layers whose scores are q k^T plus a distance-only (Toeplitz) bias, Shaw's clipped relative keys and "
      "values (as bucketed terms, O(L·k_max)) or a table bias looked up by an index (the int64 index itself is "
      "[L, L] or [B, L, L]) — {} — run one fused kernel (O(L) memory, causal keys skipped, bias gradient fused; "
      "attention dropout drawn inside it, the same cells as the reference path drops) on the CPU when "
      "`attn_softcap` is 0; the other encodings ({}: dense content-position terms or a bias normalised by the query "
      "position), softcap and cuda use the reference path. `reference`: always materialise the scores",
      fmt::join(fused, ", "), fmt::join(reference, ", "));
}

using nn::ModelConfig;

const std::vector<Key<ModelConfig>>& model_keys() {
  using M = ModelConfig;
  static const std::vector<Key<M>> keys = {
      choice("kind", at(&M::kind), "bidirectional encoder (per-token labels), causal LM, or T5-style encoder-decoder"),
      integer("d_model", at(&M::d_model), 1, kMaxDModel, "model width; must be divisible by `n_heads`"),
      integer("n_layers", at(&M::n_layers), 1, kMaxLayers, "blocks per stack"),
      integer("n_heads", at(&M::n_heads), 1, kMaxDModel, "attention heads (head_dim = d_model / n_heads)"),
      integer("d_ff", at(&M::d_ff), 1, kMaxDff, "MLP hidden width (GELU, erf form)", "4·d_model",
              std::function<void(M&)>([](M& m) { m.d_ff = 4 * m.d_model; })),
      real("dropout", at(&M::dropout), 0.0, 0.99, "on attention probabilities, block outputs and the MLP hidden layer"),
      choice("attention", at(&M::attention), attention_doc()),
      choice("norm", at(&M::norm), "LayerNorm placement (pre-LN adds a final norm)"),
      choice("norm_type", at(&M::norm_type), "LayerNorm or RMSNorm (every norm of the model)"),
      integer("max_len", at(&M::max_len), 1, kMaxLen,
              "longest position the model is built for (learned absolute table size; RoPE YaRN's original length)"),
      {"position",
       {{"position.type", "name from `relpos list`", "`none`", "the position encoding"},
        {"position.distance", "`index` or a channel name", "`index`",
         "where the distance kj - qi of a distance-indexed encoding comes from: the token positions, or a channel "
         "of `data.position_channels` (`time`: kj - qi = time[j] - time[i]); docs/data.md, \"Bach chorales\""},
        {"position.shared", "bool", per_layer_default(),
         "one encoding instance for all layers of a stack (T5) or one per layer (`relpos list --params` marks the "
         "per-layer defaults)"},
        {"position.<param>", "scalar", "per encoding",
         "the encoding's own parameters: every one is in the table [Position encoding parameters]"
         "(#position-encoding-parameters) below (`relpos list --params`). Unknown parameters are rejected with a "
         "suggestion."}},
       [](Section& s, const std::string&, M& m) { read_position(s, m); }},
      flag("bias_scale.enabled", at(&M::bias_scale, &BiasScaleConfig::enabled),
           "multiply the additive position bias by alpha: `scores + alpha * bias` (Toeplitz biases, FIRE, index "
           "biases; an encoding without an additive bias refuses it)"),
      flag("bias_scale.learnable", at(&M::bias_scale, &BiasScaleConfig::learnable),
           "alpha is a parameter (group `position`); false: a constant buffer (moved to the device with the model, "
           "not in checkpoints)"),
      real("bias_scale.init", at(&M::bias_scale, &BiasScaleConfig::init), -1e6, 1e6,
           "alpha's initial value (e.g. 0.1 for the stability recipe)"),
      flag("bias_scale.per_head", at(&M::bias_scale, &BiasScaleConfig::per_head),
           "one alpha per head instead of one per layer"),
      choice("qk_norm", at(&M::stability, &AttnStability::qk_norm),
             "stability: normalise q and k over the head dim (one gain/bias of size head_dim per layer) after the "
             "projections, before any rotation; self-attention only (`nn/stability.h`)"),
      real("attn_softcap", at(&M::stability, &AttnStability::softcap), 0.0, 1e6,
           "stability: attention logits `S -> c·tanh(S/c)` after every bias, before the masks (0 = off); bounds the "
           "logged max \\|logit\\| by c"),
      integer("mem_len", at(&M::mem_len), 0, kMaxLen,
              "Transformer-XL segment memory in training: consecutive segments per batch row, each attending to the "
              "detached hidden states of the previous `mem_len` positions (decoder, `task: text`, relative encodings "
              "only; `relpos eval --mode segments` evaluates the same way; a resumed run starts new segment streams)"),
      real("init.std", at(&M::init_std), 0.0, 10.0, "std of the token embeddings", Lower::Open),
      real("init.position_std", at(&M::position_std), 0.0, 10.0,
           "std of every learnable position table (T5, Shaw, learned absolute, …)"),
  };
  return keys;
}

const std::vector<Key<DataConfig>>& data_keys() {
  using D = DataConfig;
  static const std::vector<Key<D>> keys = {
      registry_name("task", at(&D::task), data_task_names,
                    "LM on a text file (`text`: characters or subwords, `data.tokenizer`), LM on a token file or llm.c "
                    "shards (`tokens`, docs/data.md), an encoder labelling a token file's examples from its `label` "
                    "channel (`token_labels`), a synthetic sequence task (`trainers/data/tasks.cpp` header has "
                    "the exact layouts), or an encoder task for the index-based encodings "
                    "(`trainers/data/structured_tasks.cpp`)"),
      text("path", at(&D::path), "file path",
           "`text`: UTF-8 text (vocabulary = its distinct characters, or `data.tokenizer`'s subwords); `tokens`: a "
           "relpos token file or an llm.c shard (docs/data.md)"),
      real("val_fraction", at(&D::val_fraction), 0.0, 0.9,
           "the last fraction used for validation: of the characters (`text`), of the paragraphs (`text` with "
           "subwords) or of the examples (`tokens` without `val_path`)",
           Lower::Open),
      integer("seq_len", at(&D::seq_len), 1, kMaxLen,
              "text: context length; synthetic: the (maximum) sequence length n; `patch_grid`: set to grid_h · grid_w"),
      integer("batch_size", at(&D::batch_size), 1, kMaxBatch, "sequences per micro-batch"),
      integer("vocab_size", at(&D::vocab_size), 2, kMaxVocab, "synthetic: number of symbols (`addition` needs ≥ 11)"),
      integer("min_len", at(&D::min_len), 0, kMaxLen,
              "synthetic: training lengths are uniform in [min_len, seq_len] (0 = always seq_len; at most seq_len)"),
      integer("grid_h", at(&D::grid_h), 1, 64,
              "`patch_grid`: rows of the patch grid (must equal `relative_2d`'s `grid_h`)"),
      integer("grid_w", at(&D::grid_w), 1, 64,
              "`patch_grid`: columns of the patch grid (must equal `relative_2d`'s `grid_w`)"),
      real("edge_prob", at(&D::edge_prob), 0.0, 1.0,
           "`graph`: probability of each undirected edge between the seq_len nodes"),
      optional_text("val_path", at(&D::val_path), "file path",
                    "`tokens`, `token_labels`: a separate validation file (an llm.c `*_val_*.bin` shard or a token "
                    "file); empty: the last `val_fraction` of data.path's examples validate"),
      integer("shard_vocab", at(&D::shard_vocab), 0, int64_t(kMaxTokenVocab),
              "`tokens`: the vocabulary size of llm.c shards, whose headers hold none (0: 50257 for GPT-2 shards, "
              "128256 for Llama-3 shards); a relpos token file's header holds its own"),
      free_names("position_channels", at(&D::position_channels), 16,
                 "`tokens`, `token_labels`: token-scope channels of the token file (docs/data.md) that every batch "
                 "carries as per-token positions, for the encodings that read positions from data (2D coordinates, "
                 "onset times, tree structure)"),
      choice("tokenizer.type", at(&D::tokenizer, &TokenizerConfig::type),
             "`text`: characters, or SentencePiece subwords (a model trained on the training split once per run, or "
             "`tokenizer.model`; the encoded tokens are cached in the run's `data/`, the model is saved in every "
             "checkpoint: docs/data.md)"),
      integer("tokenizer.vocab_size", at(&D::tokenizer, &TokenizerConfig::vocab_size), 16, 1 << 20,
              "sentencepiece: pieces of the trained model"),
      choice("tokenizer.model_type", at(&D::tokenizer, &TokenizerConfig::model_type),
             "sentencepiece: the segmentation algorithm of a trained model"),
      optional_text("tokenizer.model", at(&D::tokenizer, &TokenizerConfig::model), "file path",
                    "sentencepiece: a `.model` file to load instead of training one (empty: train)"),
  };
  return keys;
}

// optim.betas: absent (the defaults) or a list of two numbers in [0, 1).
void read_betas(Section& o, const std::string& leaf, OptimConfig& c) {
  const std::vector<std::string> betas = o.get_list(leaf, {});
  if (betas.empty()) return;
  const std::string at = where(o.ctx(), o.raw(leaf), o.key(leaf));
  if (betas.size() != 2) fail_config("{}: optim.betas: expected a list of two numbers", at);
  auto beta = [&](const std::string& text) {
    double v = 0;
    try {
      v = YAML::Load(text).as<double>();
    } catch (const YAML::Exception&) {
      fail_config("{}: optim.betas: '{}' is not a number", at, text);
    }
    return v;
  };
  c.beta1 = beta(betas[0]);
  c.beta2 = beta(betas[1]);
  if (!(c.beta1 >= 0 && c.beta1 < 1 && c.beta2 >= 0 && c.beta2 < 1))
    fail_config("{}: optim.betas: each must be in [0, 1), got [{}, {}]", at, c.beta1, c.beta2);
}

const std::vector<Key<OptimConfig>>& optim_keys() {
  using O = OptimConfig;
  static const O defaults{};
  static const std::vector<Key<O>> keys = {
      choice("name", at(&O::name), "PyTorch semantics (Adam: L2 decay in the gradient; AdamW: decoupled)"),
      real("lr", at(&O::lr), 0.0, 10.0, "peak learning rate", Lower::Open),
      {"betas",
       {{"betas", "[b1, b2], each in [0, 1)", fmt::format("[{}, {}]", defaults.beta1, defaults.beta2), "Adam betas"}},
       read_betas},
      real("eps", at(&O::eps), 0.0, 1.0, "Adam epsilon", Lower::Open),
      real("momentum", at(&O::momentum), 0.0, 0.999, "SGD momentum"),
      real("weight_decay", at(&O::weight_decay), 0.0, 10.0,
           "decoupled (AdamW) or L2 (Adam, SGD) weight decay of the groups not in `no_decay`"),
      name_list("no_decay", at(&O::no_decay), {nn::group::kWeights, nn::group::kNormsAndBiases, nn::group::kPosition},
                "parameter groups excluded from weight decay (every optimizer honours it)"),
      choice("schedule", at(&O::schedule), "linear warmup then cosine / linear decay to `min_lr_ratio · lr`"),
      integer("warmup", at(&O::warmup), 0, kMaxRepeat, "warmup steps (< train.steps unless the schedule is constant)"),
      real("min_lr_ratio", at(&O::min_lr_ratio), 0.0, 1.0, "final lr as a fraction of `lr`"),
      real("clip_grad_norm", at(&O::clip_grad_norm), 0.0, 1e9,
           "global L2 gradient-norm clipping (0 = off); the pre-clip norm is logged every step"),
      real("z_loss", at(&O::z_loss), 0.0, 10.0,
           "stability: adds `z_loss · mean over positions of logsumexp(logits)²` (PaLM) to the differentiated loss; "
           "the logged `loss` stays the cross-entropy, the term is logged as `z_loss`"),
  };
  return keys;
}

const std::vector<Key<TrainLoopConfig>>& train_keys() {
  using T = TrainLoopConfig;
  static const std::vector<Key<T>> keys = {
      integer("steps", at(&T::steps), 1, kMaxRepeat, "optimizer steps"),
      integer("grad_accum", at(&T::grad_accum), 1, kMaxRepeat, "micro-batches per step"),
      integer("eval_every", at(&T::eval_every), 1, kMaxRepeat, "validation every N steps (and at the end)"),
      integer("eval_batches", at(&T::eval_batches), 1, kMaxRepeat, "validation batches (fixed, the same every time)"),
      integer("log_every", at(&T::log_every), 1, kMaxRepeat, "metrics line / log line every N steps"),
      real("logit_threshold", at(&T::logit_threshold), 0.0, 1e30,
           "logit-growth monitor: logging steps record per layer the fraction of query rows whose largest "
           "|attention logit| exceeds this (`attn_rows_above_threshold`)"),
      integer("checkpoint_every", at(&T::checkpoint_every), 0, kMaxRepeat,
              "checkpoint every N steps (0: only the final one)"),
      integer("keep_last", at(&T::keep_last), 0, kMaxRepeat, "checkpoints kept (0 = all)"),
      integer("seed", at(&T::seed), 0, INT64_MAX, "initialisation, data order (seed+1) and dropout (seed+2)"),
      choice("device", at(&T::device),
             "where the model, optimizer state and batches live; `cuda` needs a build with nvcc and a GPU at run time "
             "(a clear error otherwise). Checkpoints are device-independent: train on one, `eval`/`sample`/`--resume` "
             "on the other"),
      integer("threads", at(&T::threads), 0, 1024,
              "CPU threads (0 = OMP_NUM_THREADS or all cores); determinism holds for a fixed count"),
      flag("allow_tf32", at(&T::allow_tf32),
           "`cuda` only: let cuBLAS use TF32 tensor cores for float32 GEMMs (faster; ~1e-3 relative error, so CPU and "
           "GPU curves then differ by more than float32 rounding)"),
      choice("nan_policy", at(&T::nan_policy),
             "on a non-finite loss or gradient: stop (naming the step and the first parameter with a non-finite "
             "gradient; the state after the previous step is saved when it is finite, with the RNG state a regular "
             "checkpoint of that step holds, else the previous checkpoint is named as the last good one) or skip the "
             "update and count it (the run still ends with a checkpoint)"),
      choice("precision", at(&T::precision),
             "mixed precision (autograd/autocast.h): `bf16`/`fp16` give every matmul and the fused "
             "attention's q, k, v and output 16-bit values (inputs, output and their gradients rounded to nearest "
             "even; fp16 overflows to inf above 65504) with float32 accumulation (the fused attention also multiplies "
             "its probabilities P and dS as 16-bit values, as FlashAttention does; its softmax statistics stay "
             "float32); softmax, norms, the loss, "
             "reductions, the optimizer and the weights stay float32. Storage stays float32; `bf16` GEMMs run on the "
             "CPU's bf16 units where it has them (`relpos info` names the path). `fp16` adds dynamic loss scaling. "
             "Evaluation during training runs in the same precision"),
      real("loss_scale_init", at(&T::loss_scale_init), 1.0, 16777216.0,
           "`fp16`: the first loss scale; a step whose gradients overflow is skipped (logged `overflow`, counted in "
           "`overflow_steps`) and halves it (below 1, nan_policy decides), `loss_scale_interval` finite steps in a "
           "row double it; logged as `loss_scale`, saved in checkpoints"),
      integer("loss_scale_interval", at(&T::loss_scale_interval), 1, kMaxRepeat,
              "`fp16`: finite steps in a row before the loss scale doubles"),
      integer("check_every", at(&T::check_every), 0, kMaxRepeat,
              "data-parallel runs (`mpirun -np N`): compare a checksum of every parameter across ranks every N steps "
              "(and at the start; 0 = only at the start); a mismatch stops the job naming the ranks that diverged"),
      real("dist_timeout", at(&T::dist_timeout), 0.0, 1e6,
           "data-parallel runs: seconds a rank waits for the others at each step (rank 0 also evaluates while the "
           "others wait: keep it above an evaluation's time) before the job stops naming the ranks that did not "
           "arrive",
           Lower::Open),
  };
  return keys;
}

const std::vector<Key<Config>>& output_keys() {
  static const std::vector<Key<Config>> keys = {
      text("dir", at(&Config::output_dir), "directory path",
           "run directory: `config.yaml`, `metrics.jsonl`, `metrics.csv`, `checkpoints/step_NNNNNNNN/`"),
  };
  return keys;
}

// Reads every key of `keys` from `s` (a dotted path from its sub-mapping), then refuses the
// keys of `s` and of those sub-mappings that no key names.
template <typename S>
void read_section(Section& s, const std::vector<Key<S>>& keys, S& out) {
  std::vector<std::string> known;
  std::map<std::string, std::vector<std::string>> sub_known;
  for (const Key<S>& k : keys) {
    const auto dot = k.path.find('.');
    if (dot == std::string::npos) {
      k.read(s, k.path, out);
      known.push_back(k.path);
    } else {
      const std::string sub = k.path.substr(0, dot), leaf = k.path.substr(dot + 1);
      k.read(s.child(sub), leaf, out);
      if (!sub_known.count(sub)) known.push_back(sub);
      sub_known[sub].push_back(leaf);
    }
  }
  for (auto& [sub, leaves] : sub_known) s.child(sub).finish(leaves);
  s.finish(known);
}

template <typename S>
std::vector<ConfigKeyDoc> docs_of(const std::vector<Key<S>>& keys) {
  std::vector<ConfigKeyDoc> out;
  for (const Key<S>& k : keys) out.insert(out.end(), k.docs.begin(), k.docs.end());
  return out;
}

// The sections of a config file, in order: each reads its table into the Config.
struct SectionSpec {
  std::string name;
  std::function<void(Section&, Config&)> read;
  std::function<std::vector<ConfigKeyDoc>()> docs;
};

const std::vector<SectionSpec>& section_specs() {
  static const std::vector<SectionSpec> specs = {
      {"model", [](Section& s, Config& c) { read_section(s, model_keys(), c.model); },
       [] { return docs_of(model_keys()); }},
      {"data", [](Section& s, Config& c) { read_section(s, data_keys(), c.data); },
       [] { return docs_of(data_keys()); }},
      {"optim", [](Section& s, Config& c) { read_section(s, optim_keys(), c.optim); },
       [] { return docs_of(optim_keys()); }},
      {"train", [](Section& s, Config& c) { read_section(s, train_keys(), c.train); },
       [] { return docs_of(train_keys()); }},
      {"output", [](Section& s, Config& c) { read_section(s, output_keys(), c); },
       [] { return docs_of(output_keys()); }},
  };
  return specs;
}

// What relates keys to each other within a section (one key's range depending on another).
void check_sections(const Config& c, const Ctx& ctx, const YAML::Node& root) {
  if (c.model.d_model % c.model.n_heads != 0)
    fail_config("{}: model.d_model ({}) must be divisible by model.n_heads ({})",
                where(ctx, root["model"]["n_heads"], "model.n_heads"), c.model.d_model, c.model.n_heads);
  if (c.data.min_len > c.data.seq_len)
    fail_config("{}: data.min_len ({}) must not exceed data.seq_len ({})", ctx.source, c.data.min_len, c.data.seq_len);
}

}  // namespace

const std::vector<std::string>& config_sections() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& s : section_specs()) v.push_back(s.name);
    return v;
  }();
  return names;
}

std::vector<ConfigKeyDoc> config_key_docs(const std::string& section) {
  for (const auto& s : section_specs())
    if (s.name == section) return s.docs();
  fail("config_key_docs: '{}' is not a config section ({})", section, fmt::join(config_sections(), ", "));
}

std::string config_keys_markdown(const std::string& section) {
  std::string out = "| key | type | default | meaning |\n|---|---|---|---|\n";
  for (const ConfigKeyDoc& d : config_key_docs(section))
    out += fmt::format("| `{}` | {} | {} | {} |\n", d.key, d.type, d.default_value, d.meaning);
  return out;
}

namespace {
// Receives a document's events and keeps only where the document starts. YAML::LoadAll is not
// used: on yaml-cpp 0.7 a stray top-level ',' makes it build empty documents without end
// (found by fuzz_config), so at most two documents are asked of the parser.
struct DocumentStarts : YAML::EventHandler {
  YAML::Mark start;
  void OnDocumentStart(const YAML::Mark& m) override { start = m; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};
}  // namespace

YAML::Node load_one_document(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);  // the first document
    std::istringstream in(yaml_text);
    YAML::Parser parser(in);
    DocumentStarts starts;
    if (parser.HandleNextDocument(starts) && parser.HandleNextDocument(starts))
      fail_config("{}:{}: a second YAML document (after '---', or a stray token such as ',' after the first "
                  "one); a config is one document",
                  source, starts.start.line + 1);
  } catch (const YAML::Exception& e) {
    fail_config("{}:{}:{}: invalid YAML: {}", source, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  return root;
}

void check_yaml_size(const YAML::Node& root, const std::string& source) {
  // Aliases (*a) point at their anchor's node, so a walk sees the document as expanded; the walk
  // stops at the limit, so an alias bomb ("billion laughs") costs at most kMaxYamlNodes visits.
  int64_t seen = 0;
  std::vector<YAML::Node> stack{root};
  while (!stack.empty()) {
    YAML::Node n = stack.back();
    stack.pop_back();
    if (++seen > kMaxYamlNodes)
      fail_config("{}: more than {} YAML nodes once aliases (*name) are expanded; an alias bomb?", source,
                  kMaxYamlNodes);
    if (n.IsMap())
      for (const auto& kv : n) stack.push_back(kv.first), stack.push_back(kv.second);
    else if (n.IsSequence())
      for (const auto& v : n) stack.push_back(v);
  }
}

void check_positions(const Config& c, int64_t seq_len, const std::string& what) {
  const int64_t needed = task_positions(c, seq_len);
  if (c.model.position->facts.bounded_by_max_len && c.model.max_len < needed)
    fail_config("{} {} needs {} positions, more than model.max_len ({}); learned absolute positions cannot extrapolate",
                what, seq_len, needed, c.model.max_len);
}

namespace {

// The model kind, the data task and the position encoding must fit together.
void check_model_task(const Config& c, const std::string& source) {
  const DataTask& task = find_data_task(c.data.task);
  if (c.optim.warmup >= c.train.steps && c.optim.schedule != nn::optim::LrSchedule::Constant)
    fail_config("{}: optim.warmup ({}) must be smaller than train.steps ({})", source, c.optim.warmup, c.train.steps);
  if (task.text && c.model.kind != nn::ModelKind::Decoder)
    fail_config("{}: data.task '{}' trains a language model: model.kind must be 'decoder', got '{}'", source,
                c.data.task, c.model.kind);
  if (c.data.tokenizer.type != TokenizerType::Char && !task.tokenizer)
    fail_config("{}: data.tokenizer.type '{}' tokenizes a text file: it needs a data.task that reads text, got '{}'",
                source, c.data.tokenizer.type, c.data.task);
  if (!c.data.position_channels.empty() && !task.val_file)
    fail_config("{}: data.position_channels names channels of a token file: it needs data.task 'tokens' or "
                "'token_labels', got '{}'",
                source, c.data.task);
  if (!c.data.val_path.empty() && !task.val_file)
    fail_config("{}: data.val_path is for the token-file tasks (a separate validation file), got data.task '{}'", source,
                c.data.task);
  try {
    nn::check_causal_position(c.model.position, c.model.kind != nn::ModelKind::Encoder, c.model.kind);
  } catch (const ConfigError& e) {
    fail_config("{}: {}", source, e.what());
  }
  if (task.labels_each_token && c.model.kind != nn::ModelKind::Encoder)
    fail_config("{}: data.task '{}' labels every input token: model.kind must be 'encoder', got '{}'", source,
                c.data.task, c.model.kind);
  const nn::PositionFacts& facts = c.model.position->facts;
  if (!facts.index_task.empty() && c.data.task != facts.index_task)
    fail_config("{}: model.position.type '{}' needs per-example position indices that only data.task '{}' supplies: "
                "use data.task '{}'", source, c.model.position, facts.index_task, facts.index_task);
  if (facts.grid_params && task.grid &&
      (c.model.position_params.get_int("grid_h", -1) != c.data.grid_h ||
       c.model.position_params.get_int("grid_w", -1) != c.data.grid_w))
    fail_config("{}: model.position grid_h/grid_w ({} x {}) must match data.grid_h/grid_w ({} x {})", source,
                c.model.position_params.get_int("grid_h", -1), c.model.position_params.get_int("grid_w", -1),
                c.data.grid_h, c.data.grid_w);
  if (c.model.kind == nn::ModelKind::Encoder && task.output_length_differs)
    fail_config("{}: data.task '{}' has an output of another length than its input; an encoder labels each input "
                "token: use model.kind decoder or encoder_decoder", source, c.data.task);
  if (c.data.vocab_size < task.min_vocab)
    fail_config("{}: data.task '{}' needs data.vocab_size >= {} ({}), got {}", source, task.name, task.min_vocab,
                task.min_vocab_reason, c.data.vocab_size);
}

// Builds the encoding once to check its parameters and what the config asks of it, without
// allocating the tables the config claims (fuzz_sweep_spec findings: a learned table of
// model.max_len rows, a Transformer-XL W_r of d_model^2): nn::make_position_probe.
void check_position_encoding(const Config& c, const Ctx& ctx, const YAML::Node& root) {
  const std::string& source = ctx.source;
  Generator g(0);
  nn::PositionEncodingPtr pos;
  try {
    pos = nn::make_position_probe(nn::position_config(c.model), g);
  } catch (const ConfigError& e) {
    fail_config("{}: model.position: {}", where(ctx, root["model"]["position"], "model.position"), e.what());
  }
  // Channels the encoding reads from every batch (cpe: row, col) must be in data.position_channels.
  for (const std::string& ch : c.model.position->facts.position_channels)
    if (std::find(c.data.position_channels.begin(), c.data.position_channels.end(), ch) ==
        c.data.position_channels.end())
      fail_config("{}: model.position '{}' reads the per-token position channel '{}', but data.position_channels "
                  "lists {}: add '{}' (a token-scope channel of the token file) to data.position_channels",
                  where(ctx, root["model"]["position"], "model.position"), c.model.position, ch,
                  c.data.position_channels.empty() ? "none" : fmt::format("[{}]", fmt::join(c.data.position_channels, ", ")),
                  ch);
  if (c.model.mem_len > 0 && (!text_decoder(c) || pos->is_absolute()))
    fail_config(
        "{}: model.mem_len {}: Transformer-XL segment memory trains a decoder on a text task with a "
        "relative position encoding (this config: {} on '{}' with '{}')",
        source, c.model.mem_len, c.model.kind, c.data.task, c.model.position);
  // alpha scales additive biases (Toeplitz or score_bias); an encoding without one (rotary,
  // content terms such as Shaw, CoPE, DeBERTa) would carry a parameter that does nothing.
  const bool index_bias = c.model.position->facts.index_bias;
  if (c.model.bias_scale.enabled && !index_bias) {  // an index bias always exists
    NoGradGuard ng;
    // Probe bidirectionally unless the encoding is causal-only: encoder-only encodings
    // (relative_2d) refuse a causal geometry, and which biases exist does not depend on it.
    nn::AttnGeometry geo{2, 2, 0, 0, pos->causal_only()};
    if (!pos->toeplitz_bias(geo).defined() && !pos->score_bias(geo).defined())
      fail_config(
          "{}: model.bias_scale.enabled: position encoding '{}' adds no additive bias for alpha to scale "
          "(alpha scales an additive score bias: a distance bias such as T5's or ALiBi's, or a table bias looked up by an "
          "index); disable bias_scale",
          where(ctx, root["model"]["bias_scale"], "model.bias_scale.enabled"), c.model.position);
  }
  if (c.model.kind == nn::ModelKind::Encoder && pos->causal_only())
    fail_config("{}: model.position.type '{}' only works with causal attention; an encoder is bidirectional", source,
                c.model.position);
}

}  // namespace

Config parse_config(const std::string& yaml_text, const std::string& source,
                    const std::vector<std::string>& overrides) {
  Ctx ctx{source, {}};
  // The config text is saved in every checkpoint's trainer_state.json (JSON: strict UTF-8).
  if (size_t bad = utf8_error_offset(yaml_text); bad != std::string::npos)
    fail_config("{}: invalid UTF-8 at byte offset {}", source, bad);
  YAML::Node root = load_one_document(yaml_text, source);
  check_yaml_size(root, source);
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap())
    fail_config("{}: the config must be a mapping with sections model, data, optim, train, output", source);
  reject_duplicate_keys(ctx, root, "");
  for (const auto& o : overrides) apply_override(root, o, ctx);

  Config c;
  c.source = source;
  Section top(ctx, root, "");
  for (const SectionSpec& spec : section_specs()) spec.read(top.child(spec.name), c);
  top.finish(config_sections());
  if (find_data_task(c.data.task).grid) c.data.seq_len = c.data.grid_h * c.data.grid_w;
  check_sections(c, ctx, root);
  // + PAD, BOS/SEP, EOS, spare (see tasks.cpp); a text task's vocabulary comes from its data
  c.model.vocab = find_data_task(c.data.task).text ? 1 : c.data.vocab_size + 4;
  c.model.position_channels = c.data.position_channels;  // the names the encodings find their columns by

  check_model_task(c, source);
  check_position_encoding(c, ctx, root);
  check_positions(c, c.data.seq_len, source + ": data.seq_len");
  // Every size product of a training step must fit in int64: overflow is a ConfigError
  // naming the keys (the memory check against the machine is separate: check_memory).
  (void)estimate_resources(c);
  YAML::Emitter out;
  out << root;
  c.yaml = out.c_str();
  return c;
}

bool text_decoder(const Config& c) {
  return c.model.kind == nn::ModelKind::Decoder && find_data_task(c.data.task).text;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::string text;
  try {
    text = read_whole_file(path, "config file", kMaxConfigBytes);
  } catch (const Error& e) {
    fail_config("{}", e.what());
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    fail_config("config file '{}' is empty (expected sections model, data, optim, train, output)", path);
  return parse_config(text, path, overrides);
}

}  // namespace relpos::train
