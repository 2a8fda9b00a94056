// nn/positional/params.h — the string key=value parameters of a position encoding (from
// YAML or `relpos bias --param k=v`), read through typed getters. Each getter names the
// key, the value and what was expected on error; check_known() rejects keys a variant does
// not understand, with a "did you mean" suggestion.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace relpos::nn {

class PositionParams {
 public:
  PositionParams() = default;
  explicit PositionParams(std::map<std::string, std::string> kv) : kv_(std::move(kv)) {}
  void set(const std::string& key, const std::string& value) { kv_[key] = value; }
  bool has(const std::string& key) const { return kv_.count(key) > 0; }

  int64_t get_int(const std::string& key, int64_t def) const;
  double get_double(const std::string& key, double def) const;
  bool get_bool(const std::string& key, bool def) const;
  // value must be one of `choices`
  std::string get_choice(const std::string& key, const std::string& def,
                         const std::vector<std::string>& choices) const;
  // Throw for any key not in `known` (context: "position 't5'").
  void check_known(const std::string& context, const std::vector<std::string>& known) const;
  const std::map<std::string, std::string>& items() const { return kv_; }

 private:
  std::map<std::string, std::string> kv_;
};

// Largest |value| get_int accepts for `key`: 64 for depth, 1024 for width, kMaxPositionTableRows
// for keys that set the rows of a table (k_max, num_buckets, ...), 2^30 for the rest.
// get_double rejects NaN and infinities.
inline constexpr int64_t kMaxPositionTableRows = 1 << 16;
int64_t position_int_cap(const std::string& key);

// Closest candidate by edit distance (empty if nothing is close).
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace relpos::nn
