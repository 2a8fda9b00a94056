#include "nn/positional/params.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace relpos::nn {

int64_t position_int_cap(const std::string& key) {
  // Keys that size a table or a network (rows of a table, MLP width/depth): small caps, so
  // building an encoding from untrusted parameters stays cheap (no hang, no huge allocation).
  if (key == "depth") return 64;
  if (key == "width") return 1024;
  static const char* table_keys[] = {"k_max", "num_buckets", "npos_max", "position_buckets", "max_dist",
                                     "max_len", "dim", "grid_h", "grid_w"};
  for (const char* k : table_keys)
    if (key == k) return kMaxPositionTableRows;
  return int64_t(1) << 30;  // distances, lengths: loops over them are bounded by this
}

int64_t PositionParams::get_int(const std::string& key, int64_t def) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return def;
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(it->second, &used);
  } catch (...) {
    used = 0;
  }
  RELPOS_CHECK_CONFIG(used == it->second.size() && used > 0, "position parameter '{}': '{}' is not an integer", key, it->second);
  const int64_t cap = position_int_cap(key);
  RELPOS_CHECK_CONFIG(v >= -cap && v <= cap, "position parameter '{}': {} is out of range (|value| <= {})", key, v, cap);
  return v;
}

double PositionParams::get_double(const std::string& key, double def) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return def;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(it->second, &used);
  } catch (...) {
    used = 0;
  }
  RELPOS_CHECK_CONFIG(used == it->second.size() && used > 0, "position parameter '{}': '{}' is not a number", key, it->second);
  RELPOS_CHECK_CONFIG(std::isfinite(v), "position parameter '{}': '{}' is not a finite number", key, it->second);
  return v;
}

bool PositionParams::get_bool(const std::string& key, bool def) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return def;
  const std::string& s = it->second;
  if (s == "true" || s == "1" || s == "yes") return true;
  if (s == "false" || s == "0" || s == "no") return false;
  fail_config("position parameter '{}': '{}' is not a boolean (true/false)", key, s);
}

std::string PositionParams::get_choice(const std::string& key, const std::string& def,
                                       const std::vector<std::string>& choices) const {
  auto it = kv_.find(key);
  std::string v = it == kv_.end() ? def : it->second;
  RELPOS_CHECK_CONFIG(std::find(choices.begin(), choices.end(), v) != choices.end(),
               "position parameter '{}': '{}' is not one of {}", key, v, fmt::join(choices, ", "));
  return v;
}

void PositionParams::check_known(const std::string& context, const std::vector<std::string>& known) const {
  for (const auto& [k, v] : kv_) {
    if (std::find(known.begin(), known.end(), k) != known.end()) continue;
    std::string hint = did_you_mean(k, known);
    fail_config("{}: unknown parameter '{}'{}; known: {}", context, k,
         hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint), fmt::join(known, ", "));
  }
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
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = dist(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

}  // namespace relpos::nn
