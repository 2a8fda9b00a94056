// trainers/config.cpp — YAML -> Config. A Section reads one mapping: each getter marks its
// key as used and checks type and range; finish() rejects the keys nobody asked for.
#include "trainers/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "autograd/grad_mode.h"
#include "nn/positional/params.h"
#include <cctype>
#include "nn/positional/registry.h"
#include "trainers/data/data_tasks.h"
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
  Section sub(const std::string& k) { return Section(ctx_, raw(k), key(k)); }
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

nn::ModelConfig parse_model(Section s) {
  nn::ModelConfig m;
  m.kind = *nn::parse_model_kind(s.get_choice("kind", "decoder", nn::model_kind_names()));
  m.d_model = s.get_int("d_model", 128, 1, kMaxDModel);
  m.n_layers = s.get_int("n_layers", 2, 1, kMaxLayers);
  m.n_heads = s.get_int("n_heads", 4, 1, kMaxDModel);
  m.d_ff = s.get_int("d_ff", 4 * m.d_model, 1, kMaxDff);
  m.dropout = s.get_double("dropout", 0.0, 0.0, 0.99);
  m.attention = s.get_choice("attention", "fused", {"fused", "reference"});
  m.norm = s.get_choice("norm", "pre", {"pre", "post"});
  m.norm_type = s.get_choice("norm_type", "layernorm", {"layernorm", "rmsnorm"});
  m.max_len = s.get_int("max_len", 512, 1, kMaxLen);
  if (m.d_model % m.n_heads != 0)
    fail_config("{}: model.d_model ({}) must be divisible by model.n_heads ({})",
                where(s.ctx(), s.node()["n_heads"], "model.n_heads"), m.d_model, m.n_heads);
  {
    Section p = s.sub("position");
    std::vector<std::string> names;
    for (const auto& v : nn::position_variants()) names.push_back(v.name);
    m.position = p.get_choice("type", "none", names);
    if (p.has("shared")) m.position_shared = p.get<bool>("shared", true, "true or false");
    std::map<std::string, std::string> params;
    if (p.node().IsMap())
      for (const auto& kv : p.node()) {
        std::string k = scalar_key(Ctx{}, kv.first, "model.position");
        if (k == "type" || k == "shared") continue;
        if (!kv.second.IsScalar()) fail_config("model.position.{}: expected a scalar value", k);
        std::string v = kv.second.Scalar();
        std::string lower = v;
        for (char& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
        for (const char* nf : {".nan", ".inf", "+.inf", "-.inf", "nan", "inf", "+inf", "-inf", "infinity", "-infinity"})
          if (lower == nf)
            fail_config("{}: model.position.{}: '{}' is not a finite number", where(p.ctx(), kv.second, "model.position." + k),
                        k, v);
        // Keys that set table rows, times the width of a row, bound what building the
        // encoding allocates (checked before it is built).
        const nn::PositionVariant& variant = nn::find_position_variant(m.position);
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
            fail_config("{}: model.position.{} ({}) x model.d_model ({}) is too large for a position table (at most "
                        "2^28 entries)", at, k, rows, m.d_model);
        }
        params[k] = v;
        p.raw(k);
      }
    m.position_params = nn::PositionParams(params);
  }
  {
    Section b = s.sub("bias_scale");
    m.bias_scale.enabled = b.get<bool>("enabled", false, "true or false");
    m.bias_scale.learnable = b.get<bool>("learnable", true, "true or false");
    m.bias_scale.init = b.get_double("init", 1.0, -1e6, 1e6);
    m.bias_scale.per_head = b.get<bool>("per_head", false, "true or false");
    b.finish({"enabled", "learnable", "init", "per_head"});
  }
  m.stability.qk_norm = s.get_choice("qk_norm", "none", {"none", "layernorm", "rmsnorm"});
  m.stability.softcap = s.get_double("attn_softcap", 0.0, 0.0, 1e6);
  m.mem_len = s.get_int("mem_len", 0, 0);
  {
    Section i = s.sub("init");
    m.init_std = i.get_double("std", 0.02, 0.0, 10.0, true);
    m.position_std = i.get_double("position_std", 0.02, 0.0, 10.0);
    i.finish({"std", "position_std"});
  }
  s.finish({"kind", "d_model", "n_layers", "n_heads", "d_ff", "dropout", "attention", "norm", "norm_type", "max_len",
            "position", "bias_scale", "init", "qk_norm", "attn_softcap", "mem_len"});
  return m;
}

}  // namespace

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
  if (nn::find_position_variant(c.model.position).facts.bounded_by_max_len && c.model.max_len < needed)
    fail_config("{} {} needs {} positions, more than model.max_len ({}); learned absolute positions cannot extrapolate",
                what, seq_len, needed, c.model.max_len);
}

namespace {

DataConfig parse_data(Section d, const std::string& source) {
  DataConfig c;
  c.task = d.get_choice("task", "text", data_task_names());
  c.path = d.get<std::string>("path", c.path, "a file path");
  c.val_fraction = d.get_double("val_fraction", 0.1, 0.0, 0.9, true);
  c.seq_len = d.get_int("seq_len", 128, 1, kMaxLen);
  c.batch_size = d.get_int("batch_size", 16, 1, kMaxBatch);
  c.vocab_size = d.get_int("vocab_size", 16, 2, kMaxVocab);
  c.min_len = d.get_int("min_len", 0, 0, kMaxLen);
  c.grid_h = d.get_int("grid_h", 4, 1, 64);
  c.grid_w = d.get_int("grid_w", 4, 1, 64);
  c.edge_prob = d.get_double("edge_prob", 0.2, 0.0, 1.0);
  d.finish({"task", "path", "val_fraction", "seq_len", "batch_size", "vocab_size", "min_len", "grid_h", "grid_w",
            "edge_prob"});
  if (find_data_task(c.task).grid) c.seq_len = c.grid_h * c.grid_w;
  if (c.min_len > c.seq_len)
    fail_config("{}: data.min_len ({}) must not exceed data.seq_len ({})", source, c.min_len, c.seq_len);
  return c;
}

// optim.betas: absent (the defaults) or a list of two numbers in [0, 1).
void parse_betas(Section& o, const std::string& source, OptimConfig& c) {
  const std::vector<std::string> betas = o.get_list("betas", {});
  if (betas.empty()) return;
  if (betas.size() != 2) fail_config("{}: optim.betas: expected a list of two numbers", source);
  auto beta = [&](const std::string& text) {
    double v = 0;
    try {
      v = YAML::Load(text).as<double>();
    } catch (const YAML::Exception&) {
      fail_config("{}: optim.betas: '{}' is not a number", source, text);
    }
    return v;
  };
  c.beta1 = beta(betas[0]);
  c.beta2 = beta(betas[1]);
  if (!(c.beta1 >= 0 && c.beta1 < 1 && c.beta2 >= 0 && c.beta2 < 1))
    fail_config("{}: optim.betas: each must be in [0, 1), got [{}, {}]", source, c.beta1, c.beta2);
}

OptimConfig parse_optim(Section o, const std::string& source) {
  OptimConfig c;
  c.name = o.get_choice("name", "adamw", {"sgd", "adam", "adamw"});
  c.lr = o.get_double("lr", 3e-4, 0.0, 10.0, true);
  parse_betas(o, source, c);
  c.eps = o.get_double("eps", 1e-8, 0.0, 1.0, true);
  c.momentum = o.get_double("momentum", 0.9, 0.0, 0.999);
  c.weight_decay = o.get_double("weight_decay", 0.0, 0.0, 10.0);
  c.no_decay = o.get_list("no_decay", c.no_decay);
  for (const auto& g : c.no_decay)
    if (g != "position" && g != "norms_biases" && g != "weights")
      fail_config("{}: optim.no_decay: '{}' is not a parameter group (position, norms_biases, weights)", source, g);
  c.schedule = o.get_choice("schedule", "cosine", {"constant", "cosine", "linear"});
  c.warmup = o.get_int("warmup", 0, 0, kMaxRepeat);
  c.min_lr_ratio = o.get_double("min_lr_ratio", 0.1, 0.0, 1.0);
  c.clip_grad_norm = o.get_double("clip_grad_norm", 1.0, 0.0, 1e9);
  c.z_loss = o.get_double("z_loss", 0.0, 0.0, 10.0);
  o.finish({"name", "lr", "betas", "eps", "momentum", "weight_decay", "no_decay", "schedule", "warmup", "min_lr_ratio",
            "clip_grad_norm", "z_loss"});
  return c;
}

TrainLoopConfig parse_train(Section t) {
  TrainLoopConfig c;
  c.steps = t.get_int("steps", 1000, 1, kMaxRepeat);
  c.grad_accum = t.get_int("grad_accum", 1, 1, kMaxRepeat);
  c.eval_every = t.get_int("eval_every", 200, 1, kMaxRepeat);
  c.eval_batches = t.get_int("eval_batches", 20, 1, kMaxRepeat);
  c.log_every = t.get_int("log_every", 10, 1, kMaxRepeat);
  c.checkpoint_every = t.get_int("checkpoint_every", 0, 0, kMaxRepeat);
  c.keep_last = t.get_int("keep_last", 2, 0, kMaxRepeat);
  c.seed = uint64_t(t.get_int("seed", 1337, 0));
  c.device = t.get_choice("device", "cpu", {"cpu", "cuda"});
  c.threads = t.get_int("threads", 0, 0, 1024);
  c.allow_tf32 = t.get<bool>("allow_tf32", false, "true or false");
  c.nan_policy = t.get_choice("nan_policy", "abort", {"abort", "skip"});
  c.check_every = t.get_int("check_every", 100, 0, kMaxRepeat);
  c.dist_timeout = t.get_double("dist_timeout", 300.0, 0.0, 1e6, /*lo_open=*/true);
  t.finish({"steps", "grad_accum", "eval_every", "eval_batches", "log_every", "checkpoint_every", "keep_last", "seed",
            "device", "allow_tf32", "threads", "nan_policy", "check_every", "dist_timeout"});
  return c;
}

std::string parse_output_dir(Section o, const Ctx& ctx) {
  std::string dir = o.get<std::string>("dir", "runs/default", "a directory path");
  if (dir.empty() || dir.find('\0') != std::string::npos)
    fail_config("{}: output.dir: expected a non-empty directory path", where(ctx, o.node()["dir"], "output.dir"));
  o.finish({"dir"});
  return dir;
}

// The model kind, the data task and the position encoding must fit together.
void check_model_task(const Config& c, const std::string& source) {
  const DataTask& task = find_data_task(c.data.task);
  if (c.optim.warmup >= c.train.steps && c.optim.schedule != "constant")
    fail_config("{}: optim.warmup ({}) must be smaller than train.steps ({})", source, c.optim.warmup, c.train.steps);
  if (task.text && c.model.kind != nn::ModelKind::Decoder)
    fail_config("{}: data.task 'text' trains a language model: model.kind must be 'decoder', got '{}'", source,
                c.model.kind);
  if (!nn::find_position_variant(c.model.position).causal_capable && c.model.kind != nn::ModelKind::Encoder)
    fail_config("{}: model.position.type '{}' is encoder-only (bidirectional attention); model.kind '{}' has causal "
                "self-attention", source, c.model.position, c.model.kind);
  if (task.labels_each_token && c.model.kind != nn::ModelKind::Encoder)
    fail_config("{}: data.task '{}' labels every input token: model.kind must be 'encoder', got '{}'", source,
                c.data.task, c.model.kind);
  const nn::PositionFacts& facts = nn::find_position_variant(c.model.position).facts;
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
  if (c.model.mem_len > 0 && (!text_decoder(c) || pos->is_absolute()))
    fail_config(
        "{}: model.mem_len {}: Transformer-XL segment memory trains a decoder on a text task with a "
        "relative position encoding (this config: {} on '{}' with '{}')",
        source, c.model.mem_len, c.model.kind, c.data.task, c.model.position);
  // alpha scales additive biases (Toeplitz or score_bias); an encoding without one (rotary,
  // content terms such as Shaw, CoPE, DeBERTa) would carry a parameter that does nothing.
  const bool index_bias = !nn::find_position_variant(c.model.position).facts.index_task.empty();
  if (c.model.bias_scale.enabled && !index_bias) {  // an index bias always exists
    NoGradGuard ng;
    // Probe bidirectionally unless the encoding is causal-only: encoder-only encodings
    // (relative_2d) refuse a causal geometry, and which biases exist does not depend on it.
    nn::AttnGeometry geo{2, 2, 0, 0, pos->causal_only()};
    if (!pos->toeplitz_bias(geo).defined() && !pos->score_bias(geo).defined())
      fail_config(
          "{}: model.bias_scale.enabled: position encoding '{}' adds no additive bias for alpha to scale "
          "(alpha scales T5, ALiBi, KERPLE, Sandwich, FIRE, dynamic and index biases); disable bias_scale",
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
  c.model = parse_model(top.sub("model"));
  c.data = parse_data(top.sub("data"), source);
  c.optim = parse_optim(top.sub("optim"), source);
  c.train = parse_train(top.sub("train"));
  c.output_dir = parse_output_dir(top.sub("output"), ctx);
  top.finish({"model", "data", "optim", "train", "output"});
  // + PAD, BOS/SEP, EOS, spare (see tasks.cpp); a text task's vocabulary comes from its data
  c.model.vocab = find_data_task(c.data.task).text ? 1 : c.data.vocab_size + 4;

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
