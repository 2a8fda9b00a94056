// nn/positional/params.h — the parameters of a position encoding.
//
// Each encoding declares its parameters once, as a ParamSchema in its own file (name, type,
// default, bound, one-line doc; see PositionVariant in registry.h). Validation, defaults,
// `relpos list --params` and docs/config.md's table are all read from that declaration.
//
// PositionParams holds the string key=value pairs a user gave (YAML model.position.<key>, or
// `relpos bias --param k=v`). make_position_encoding binds them to the variant's schema
// (bind(): unknown keys are refused with a "did you mean", every value is parsed and bounded),
// and the variant's make reads typed values whose defaults come from the schema:
//   p.get_int("num_buckets")             // the schema's literal default when absent
//   p.get_int("width", d_model / 4)      // a default computed from the model (schema: Computed)
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace relpos::nn {

enum class ParamType { Int, Float, Bool, Choice };

// Rows of a table (k_max, num_buckets, ...) are bounded by this, so building an encoding from
// untrusted parameters stays cheap; config validation also bounds rows x d_model.
inline constexpr int64_t kMaxPositionTableRows = 1 << 16;

// A default the encoding computes from the model's sizes, shown as `text` in the docs.
struct Computed {
  std::string text;
};

// One parameter of one encoding: the one place its facts are written.
struct ParamSpec {
  std::string name;
  ParamType type = ParamType::Int;
  std::string default_value;  // a literal of `type` (parsed like a user's value); empty when computed
  std::string computed;       // the docs' default when the encoding computes it ("model.max_len", "required")
  std::string doc;
  std::vector<std::string> choices;    // ParamType::Choice
  int64_t max_abs = int64_t(1) << 30;  // ParamType::Int: |value| <= max_abs
  bool table_rows = false;             // ParamType::Int: sets the rows of a table

  ParamSpec& rows();                  // a table's row count: |value| <= kMaxPositionTableRows
  ParamSpec& at_most(int64_t bound);  // |value| <= bound (network sizes: width, depth)
  std::string type_name() const;      // "int", "float", "bool" or "a | b | c"
  std::string default_text() const;   // default_value, else computed
};
using ParamSchema = std::vector<ParamSpec>;

// The builders an encoding's schema is written with.
namespace param {
ParamSpec integer(std::string name, std::string def, std::string doc);
ParamSpec integer(std::string name, Computed def, std::string doc);
ParamSpec real(std::string name, std::string def, std::string doc);
ParamSpec real(std::string name, Computed def, std::string doc);
ParamSpec flag(std::string name, std::string def, std::string doc);
ParamSpec choice(std::string name, std::vector<std::string> choices, std::string def, std::string doc);
}  // namespace param

class PositionParams {
 public:
  PositionParams() = default;
  explicit PositionParams(std::map<std::string, std::string> kv) : kv_(std::move(kv)) {}
  void set(const std::string& key, const std::string& value) { kv_[key] = value; }
  bool has(const std::string& key) const { return kv_.count(key) > 0; }
  const std::map<std::string, std::string>& items() const { return kv_; }

  // These values read against `schema` (context names the encoding in messages: "position
  // 't5'"): a key the schema lacks is refused (with a suggestion and the known keys), and
  // every value given is parsed by its type and bound now, so no error waits for a getter.
  PositionParams bind(const ParamSchema& schema, const std::string& context) const;
  // Refuse any key outside `keys` (a subset a particular use accepts: rope's eval scaling).
  void check_known(const std::string& context, const std::vector<std::string>& keys) const;

  // Typed values. One argument: the schema's literal default where the key is absent (bound
  // parameters only). Two: `def` where absent (a default computed from the model, or an
  // unbound read). Each names the key, the value and what was expected on error.
  int64_t get_int(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t def) const;
  double get_double(const std::string& key) const;
  double get_double(const std::string& key, double def) const;
  bool get_bool(const std::string& key) const;
  bool get_bool(const std::string& key, bool def) const;
  std::string get_choice(const std::string& key) const;
  std::string get_choice(const std::string& key, const std::string& def) const;  // bound only
  // The same given values (bound or not).
  bool operator==(const PositionParams& o) const { return kv_ == o.kv_; }

 private:
  const ParamSpec& spec(const std::string& key) const;     // bound: the key's declaration
  const std::string* value(const std::string& key) const;  // given or literal default; null: neither

  std::map<std::string, std::string> kv_;
  const ParamSchema* schema_ = nullptr;  // set by bind(); schemas live as long as the registry
  std::string context_;
};

// Closest candidate by edit distance (empty if nothing is close).
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace relpos::nn
