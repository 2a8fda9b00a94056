// nn/positional/registry.cpp — the list of position encodings (RELPOS_POSITION_ENCODINGS in
// registry.h), lookup by name, binding parameters to their schema, and parameter counts.
#include "nn/positional/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "autograd/ops.h"
#include "core/shape.h"
#include "nn/positional/params.h"

namespace relpos::nn {

const std::vector<PositionVariant>& position_variants() {
#define RELPOS_POSITION_ENCODING_ENTRY(name) name##_encoding(),
  static const std::vector<PositionVariant> v = {RELPOS_POSITION_ENCODINGS(RELPOS_POSITION_ENCODING_ENTRY)};
#undef RELPOS_POSITION_ENCODING_ENTRY
  return v;
}

const ParamSpec* PositionVariant::param(const std::string& key) const {
  for (const ParamSpec& p : params)
    if (p.name == key) return &p;
  return nullptr;
}

const PositionVariant& find_position_variant(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& v : position_variants()) {
    if (v.name == name) return v;
    names.push_back(v.name);
  }
  std::string hint = did_you_mean(name, names);
  fail_config("unknown position encoding '{}'{}; available: {}", name,
              hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint), fmt::join(names, ", "));
}

PositionEncodingPtr make_position_encoding(const PositionConfig& cfg, Generator& gen) {
  RELPOS_CHECK(cfg.n_heads > 0 && cfg.head_dim > 0 && cfg.d_model > 0,
               "position encoding '{}': model sizes must be set (d_model {}, n_heads {}, head_dim {})", cfg.type,
               cfg.d_model, cfg.n_heads, cfg.head_dim);
  const PositionVariant& v = find_position_variant(cfg.type);
  PositionConfig bound = cfg;
  bound.params = cfg.params.bind(v.params, fmt::format("position '{}'", v.name));
  int64_t column = -1;
  if (cfg.distance != "index") {
    RELPOS_CHECK_CONFIG(
        v.facts.distance_indexed,
        "position '{}': model.position.distance '{}' needs an encoding that is a function of the distance kj - qi "
        "alone; the distance-indexed ones are: {}",
        v.name, cfg.distance, fmt::join(distance_indexed_names(), ", "));
    column = channel_column(cfg, cfg.distance);  // refuses a channel the data does not carry
  }
  PositionEncodingPtr p = v.make(bound, gen);
  p->set_distance_column(column);
  return p;
}

std::vector<std::string> distance_indexed_names() {
  std::vector<std::string> out;
  for (const auto& v : position_variants())
    if (v.facts.distance_indexed) out.push_back(v.name);
  return out;
}

std::string position_params_markdown() {
  auto cell = [](std::string s) {  // a '|' inside a cell would end it
    std::string r;
    for (char c : s) r += c == '|' ? std::string("\\|") : std::string(1, c);
    return r;
  };
  std::string out = "| encoding | parameter | type | default | meaning |\n|---|---|---|---|---|\n";
  for (const auto& v : position_variants()) {
    if (v.params.empty()) out += fmt::format("| `{}` | — | | | no parameters |\n", v.name);
    for (const auto& p : v.params)
      out += fmt::format("| `{}` | `{}` | {} | {} | {} |\n", v.name, p.name, cell(p.type_name()),
                         cell(p.default_text()), cell(p.doc));
  }
  return out;
}

namespace {

// cfg at the smallest sizes of the same parity, max_len <= 64.
PositionConfig small_position_config(const PositionConfig& cfg) {
  PositionConfig s = cfg;
  s.n_heads = 2 - cfg.n_heads % 2;
  s.head_dim = 2 - cfg.head_dim % 2;
  s.d_model = s.n_heads * s.head_dim;
  s.max_len = std::min<int64_t>(cfg.max_len, 64);
  return s;
}

int64_t built_parameter_count(const PositionConfig& cfg) {
  Generator g(0);
  int64_t n = 0;
  for (const Variable& p : make_position_encoding(cfg, g)->parameters()) n += p.numel();
  return n;
}

// The sizes the count is a polynomial in, with its degree. The small sizes built are
// first, first + 4, ... where first (5..8) has the real size's residue mod 4: so the parity
// checks (an even head_dim or d_model) hold for them as for the real size, and sizes that
// enter as floor(d_model / 4) (dynamic_bias's default width) are polynomials on that lattice
// (from 5 on, clear of max(d_model / 4, 1)'s floor at 1).
struct CountAxis {
  int64_t PositionConfig::*field;
  int degree;
};
constexpr CountAxis kCountAxes[] = {{&PositionConfig::n_heads, 2}, {&PositionConfig::head_dim, 2},
                                    {&PositionConfig::max_len, 1}};
constexpr int64_t kCountStep = 4;

// f(x0 + kCountStep t) from f(x0), f(x0 + kCountStep), ... (Newton's forward differences;
// exact for a polynomial of degree < f.size()). nullopt on overflow.
std::optional<int64_t> newton_forward(const std::vector<int64_t>& f, int64_t t) {
  int64_t acc = f[0], term = 0;
  if (f.size() > 1 && (!checked_mul(f[1] - f[0], t, term) || !checked_add(acc, term, acc))) return std::nullopt;
  int64_t pairs = 0;  // C(t, 2)
  if (f.size() > 2 && (!checked_mul(t, t - 1, pairs) || !checked_mul(f[2] - 2 * f[1] + f[0], pairs / 2, term) ||
                       !checked_add(acc, term, acc)))
    return std::nullopt;
  return acc;
}

std::optional<int64_t> count_from(PositionConfig cfg, size_t axis) {
  if (axis == std::size(kCountAxes)) {
    cfg.d_model = cfg.n_heads * cfg.head_dim;
    return built_parameter_count(cfg);
  }
  const CountAxis& a = kCountAxes[axis];
  const int64_t real = cfg.*a.field;
  const int64_t first = (axis == 2 ? 64 : 4) + (real - 1) % kCountStep + 1;  // 5..8; max_len 65..68
  if (real < first + kCountStep * (a.degree + 1)) return count_from(cfg, axis + 1);  // small already: build it
  std::vector<int64_t> f;
  for (int k = 0; k <= a.degree; ++k) {
    cfg.*a.field = first + kCountStep * k;
    const std::optional<int64_t> n = count_from(cfg, axis + 1);
    if (!n) return std::nullopt;
    f.push_back(*n);
  }
  return newton_forward(f, (real - first) / kCountStep);
}

}  // namespace

std::optional<int64_t> position_parameter_count(const PositionConfig& cfg) {
  RELPOS_CHECK(cfg.n_heads > 0 && cfg.head_dim > 0 && cfg.d_model == cfg.n_heads * cfg.head_dim && cfg.max_len > 0,
               "position encoding '{}': inconsistent sizes (d_model {}, n_heads {}, head_dim {}, max_len {})", cfg.type,
               cfg.d_model, cfg.n_heads, cfg.head_dim, cfg.max_len);
  try {
    return count_from(cfg, 0);
  } catch (const Error&) {
    // A check that the small sizes fail and the real ones may pass (rope: a fraction of
    // head_dim that leaves no rotary pair at head_dim 2). Such encodings have no tables that
    // grow with the sizes; the real build is cheap, and gives the real error if there is one.
    return built_parameter_count(cfg);
  }
}

PositionEncodingPtr make_position_probe(const PositionConfig& cfg, Generator& gen) {
  PositionConfig c = cfg;
  c.max_len = std::min<int64_t>(cfg.max_len, 64);
  const std::optional<int64_t> n = position_parameter_count(c);
  return make_position_encoding(n && *n <= (int64_t(1) << 22) ? c : small_position_config(c), gen);
}

void PositionEncoding::set_eval_scaling(const PositionParams& params) {
  std::vector<std::string> keys;
  for (const auto& kv : params.items()) keys.push_back(kv.first);
  fail_config("evaluation-time scaling ({}) is not supported by position encoding '{}'", fmt::join(keys, ", "), type());
}

Variable PositionEncoding::score_bias(const AttnGeometry& g) const {
  const IndexBias ib = index_bias(g);
  if (!ib.table.defined()) return {};
  Variable b = embedding(ib.table, ib.index);  // [(B,) Lq, Lk, H]
  return ib.index.dim() == 2 ? permute(b, {2, 0, 1}) : permute(b, {0, 3, 1, 2});
}

Tensor PositionEncoding::cached(const char* tag, std::initializer_list<int64_t> key,
                                const std::function<Tensor()>& build) const {
  auto k = std::make_pair(std::string(tag), std::vector<int64_t>(key));
  auto it = cache_.find(k);
  if (it != cache_.end()) return it->second;
  if (cache_.size() >= 256) cache_.clear();
  Tensor t = build();
  if (t.device() != device()) t = t.to(device());
  return cache_.emplace(std::move(k), std::move(t)).first->second;
}

Tensor PositionEncoding::geometry_cached(const char* tag, const AttnGeometry& g,
                                         const std::function<Tensor()>& build) const {
  return cached(tag, {g.Lq, g.Lk, g.q_offset, g.k_offset, g.causal ? 1 : 0}, build);
}

int64_t channel_column(const PositionConfig& cfg, const std::string& name) {
  for (size_t c = 0; c < cfg.channels.size(); ++c)
    if (cfg.channels[c] == name) return int64_t(c);
  fail_config("position '{}' reads the per-token position channel '{}', but data.position_channels lists {}: add "
              "'{}' (a token-scope channel of the token file) to data.position_channels",
              cfg.type, name, cfg.channels.empty() ? "none" : fmt::format("[{}]", fmt::join(cfg.channels, ", ")),
              name);
}

Tensor toeplitz_distances(const AttnGeometry& g) {
  const int64_t n = g.Lq + g.Lk - 1;
  const int64_t first = (g.k_offset - g.q_offset) - (g.Lq - 1);
  return Tensor::arange(first, first + n);
}

}  // namespace relpos::nn
