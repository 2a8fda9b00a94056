// nn/positional/params.cpp — see params.h.
#include "nn/positional/params.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/error.h"

namespace relpos::nn {

ParamSpec& ParamSpec::rows() {
  table_rows = true;
  max_abs = kMaxPositionTableRows;
  return *this;
}

ParamSpec& ParamSpec::at_most(int64_t bound) {
  max_abs = bound;
  return *this;
}

std::string ParamSpec::type_name() const {
  switch (type) {
    case ParamType::Int:
      return "int";
    case ParamType::Float:
      return "float";
    case ParamType::Bool:
      return "bool";
    case ParamType::Choice:
      return fmt::format("{}", fmt::join(choices, " | "));
  }
  return "?";
}

std::string ParamSpec::default_text() const {
  return default_value.empty() ? computed : default_value;
}

namespace param {
ParamSpec integer(std::string name, std::string def, std::string doc) {
  return {.name = std::move(name), .type = ParamType::Int, .default_value = std::move(def), .doc = std::move(doc)};
}
ParamSpec integer(std::string name, Computed def, std::string doc) {
  return {.name = std::move(name), .type = ParamType::Int, .computed = std::move(def.text), .doc = std::move(doc)};
}
ParamSpec real(std::string name, std::string def, std::string doc) {
  return {.name = std::move(name), .type = ParamType::Float, .default_value = std::move(def), .doc = std::move(doc)};
}
ParamSpec real(std::string name, Computed def, std::string doc) {
  return {.name = std::move(name), .type = ParamType::Float, .computed = std::move(def.text), .doc = std::move(doc)};
}
ParamSpec flag(std::string name, std::string def, std::string doc) {
  return {.name = std::move(name), .type = ParamType::Bool, .default_value = std::move(def), .doc = std::move(doc)};
}
ParamSpec choice(std::string name, std::vector<std::string> choices, std::string def, std::string doc) {
  return {.name = std::move(name),
          .type = ParamType::Choice,
          .default_value = std::move(def),
          .doc = std::move(doc),
          .choices = std::move(choices)};
}
}  // namespace param

namespace {

int64_t parse_int(const std::string& key, const std::string& s, int64_t max_abs) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (...) {
    used = 0;
  }
  RELPOS_CHECK_CONFIG(used == s.size() && used > 0, "position parameter '{}': '{}' is not an integer", key, s);
  RELPOS_CHECK_CONFIG(v >= -max_abs && v <= max_abs, "position parameter '{}': {} is out of range (|value| <= {})", key,
                      v, max_abs);
  return v;
}

double parse_double(const std::string& key, const std::string& s) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    used = 0;
  }
  RELPOS_CHECK_CONFIG(used == s.size() && used > 0, "position parameter '{}': '{}' is not a number", key, s);
  RELPOS_CHECK_CONFIG(std::isfinite(v), "position parameter '{}': '{}' is not a finite number", key, s);
  return v;
}

bool parse_bool(const std::string& key, const std::string& s) {
  if (s == "true" || s == "1" || s == "yes") return true;
  if (s == "false" || s == "0" || s == "no") return false;
  fail_config("position parameter '{}': '{}' is not a boolean (true/false)", key, s);
}

void parse_choice(const std::string& key, const std::string& s, const std::vector<std::string>& choices) {
  RELPOS_CHECK_CONFIG(std::find(choices.begin(), choices.end(), s) != choices.end(),
                      "position parameter '{}': '{}' is not one of {}", key, s, fmt::join(choices, ", "));
}

// Parse `s` as the value of `spec` (throws ConfigError naming the key).
void check_value(const ParamSpec& spec, const std::string& s) {
  switch (spec.type) {
    case ParamType::Int:
      parse_int(spec.name, s, spec.max_abs);
      break;
    case ParamType::Float:
      parse_double(spec.name, s);
      break;
    case ParamType::Bool:
      parse_bool(spec.name, s);
      break;
    case ParamType::Choice:
      parse_choice(spec.name, s, spec.choices);
      break;
  }
}

}  // namespace

PositionParams PositionParams::bind(const ParamSchema& schema, const std::string& context) const {
  std::vector<std::string> keys;
  for (const ParamSpec& s : schema) keys.push_back(s.name);
  check_known(context, keys);
  PositionParams b = *this;
  b.schema_ = &schema;
  b.context_ = context;
  for (const auto& [k, v] : kv_) check_value(b.spec(k), v);
  return b;
}

void PositionParams::check_known(const std::string& context, const std::vector<std::string>& keys) const {
  for (const auto& [k, v] : kv_) {
    if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
    std::string hint = did_you_mean(k, keys);
    fail_config("{}: unknown parameter '{}'{}; known: {}", context, k,
                hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint), fmt::join(keys, ", "));
  }
}

const ParamSpec& PositionParams::spec(const std::string& key) const {
  RELPOS_CHECK(schema_, "position parameter '{}' read with its schema's default before bind()", key);
  for (const ParamSpec& s : *schema_)
    if (s.name == key) return s;
  fail("{}: parameter '{}' is read but not declared in its schema", context_, key);
}

const std::string* PositionParams::value(const std::string& key) const {
  auto it = kv_.find(key);
  if (it != kv_.end()) return &it->second;
  const ParamSpec& s = spec(key);
  RELPOS_CHECK(!s.default_value.empty(), "{}: parameter '{}' has no literal default (it is {})", context_, key,
               s.computed.empty() ? "undocumented" : s.computed);
  return &s.default_value;
}

int64_t PositionParams::get_int(const std::string& key) const {
  return parse_int(key, *value(key), spec(key).max_abs);
}
int64_t PositionParams::get_int(const std::string& key, int64_t def) const {
  const int64_t max_abs = schema_ ? spec(key).max_abs : int64_t(1) << 30;  // bound: the key is declared
  auto it = kv_.find(key);
  return it == kv_.end() ? def : parse_int(key, it->second, max_abs);
}
double PositionParams::get_double(const std::string& key) const {
  return parse_double(key, *value(key));
}
double PositionParams::get_double(const std::string& key, double def) const {
  if (schema_) spec(key);  // bound: the key is declared
  auto it = kv_.find(key);
  return it == kv_.end() ? def : parse_double(key, it->second);
}
bool PositionParams::get_bool(const std::string& key) const {
  return parse_bool(key, *value(key));
}
bool PositionParams::get_bool(const std::string& key, bool def) const {
  if (schema_) spec(key);  // bound: the key is declared
  auto it = kv_.find(key);
  return it == kv_.end() ? def : parse_bool(key, it->second);
}
std::string PositionParams::get_choice(const std::string& key) const {
  const std::string& v = *value(key);
  parse_choice(key, v, spec(key).choices);
  return v;
}
std::string PositionParams::get_choice(const std::string& key, const std::string& def) const {
  auto it = kv_.find(key);
  const std::string& v = it == kv_.end() ? def : it->second;
  parse_choice(key, v, spec(key).choices);
  return v;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  auto dist = [](const std::string& a, const std::string& b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= b.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  // A case-insensitive exact match first (FP16 -> fp16), then the nearest by edit distance
  // (ties: the first candidate).
  const auto lower = [](std::string s) {
    for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  for (const auto& c : candidates)
    if (lower(c) == lower(word)) return c;
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = dist(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

}  // namespace relpos::nn
