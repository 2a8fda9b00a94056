// nn/positional/param_docs.cpp — see param_docs.h. One entry per parameter a variant's make_*
// accepts (its check_known list), with the default that make_* uses.
#include "nn/positional/param_docs.h"

#include <fmt/format.h>

#include <map>

#include "core/error.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

namespace {
const std::map<std::string, std::vector<PositionParamDoc>>& table() {
  static const std::map<std::string, std::vector<PositionParamDoc>> t = {
      {"none", {}},
      {"sinusoidal", {{"base", "float", "10000", "frequency base: PE[p, 2i] = sin(p base^(-2i/D)), PE[p, 2i+1] = cos(..)"}}},
      {"learned", {{"max_len", "int", "model.max_len", "rows of the learned table [max_len, D]; longer inputs are an error"}}},
      {"t5",
       {{"num_buckets", "int", "32", "rows of the bias table [num_buckets, H] (even, >= 4)"},
        {"max_distance", "int", "128", "distance where the log-spaced buckets end (> num_buckets/2)"},
        {"scale", "bool", "false", "multiply q.k by 1/sqrt(head_dim) (T5 does not)"}}},
      {"alibi", {{"learnable", "bool", "false", "make the per-head slopes a trained parameter (stored `slopes` [H])"}}},
      {"rope",
       {{"base", "float", "10000", "frequency base: inv_freq[p] = base^(-2p/r)"},
        {"fraction", "float", "1.0", "fraction of head_dim rotated (r = floor(fraction head_dim / 2) * 2)"},
        {"style", "half | interleaved", "half", "pairs (p, p + r/2) (GPT-NeoX) or (2p, 2p + 1) (GPT-J)"},
        {"scaling", "none | linear | ntk | yarn", "none", "context scaling of the frequencies"},
        {"factor", "float", "1.0", "scaling factor (>= 1)"},
        {"original_max_len", "int", "model.max_len", "YaRN's original context length L0"},
        {"beta_fast", "float", "32", "YaRN ramp: fast boundary"},
        {"beta_slow", "float", "1", "YaRN ramp: slow boundary"}}},
      {"shaw", {{"k_max", "int", "16", "distances are clipped to [-k_max, k_max]; tables [2 k_max + 1, head_dim]"}}},
      {"transformer_xl", {{"clamp_len", "int", "-1", "clamp distances to at most clamp_len (-1: off)"}}},
      {"kerple_log",
       {{"r1_init", "float", "U(0, 2) per head", "initial r1 > 0 of -r1 log(1 + r2 |i - j|), all heads"},
        {"r2_init", "float", "U(0, 1) per head", "initial r2 > 0, all heads"}}},
      {"kerple_power",
       {{"r1_init", "float", "U(0, 1) per head", "initial r1 > 0 of -r1 |i - j|^r2, all heads"},
        {"r2_init", "float", "U(0, 2) per head", "initial r2 in (0, 2), all heads"}}},
      {"fire",
       {{"width", "int", "32", "hidden width of the MLP 1 -> width -> H (ReLU)"},
        {"init_c", "float", "0.1", "initial c of psi(x) = log(|c x| + 1) (nonzero)"},
        {"init_L", "float", "512", "initial threshold L of the normaliser psi(max(L, i))"},
        {"eps", "float", "1e-6", "added to the normaliser"}}},
      {"sandwich", {{"dim", "int", "head_dim", "d' of the sinusoid sum (even)"}}},
      {"dynamic_bias",
       {{"depth", "int", "2", "hidden layers of the MLP (SiLU)"},
        {"width", "int", "max(d_model / 4, 1)", "hidden width of the MLP"},
        {"log_distance", "bool", "false", "feed sign(x) log(|x| + 1) instead of x = i - j"}}},
      {"xpos",
       {{"base", "float", "10000", "rotation frequency base"},
        {"scale_base", "float", "512", "decay exponent divisor: zeta^(m / scale_base)"},
        {"gamma", "float", "0.4", "zeta_p = (2p/d + gamma) / (1 + gamma)"},
        {"style", "interleaved | half", "interleaved", "rotation pairs (2p, 2p + 1) or (p, p + d/2)"}}},
      {"cope", {{"npos_max", "int", "16", "contextual positions 0 .. npos_max - 1; table [npos_max, head_dim]"}}},
      {"relative_2d",
       {{"grid_h", "int", "required", "patch grid height Wh"}, {"grid_w", "int", "required", "patch grid width Ww"}}},
      {"graph_spd", {{"max_dist", "int", "20", "distances >= max_dist share a row; table [max_dist + 2, H]"}}},
      {"deberta",
       {{"position_buckets", "int", "256", "log buckets (<= 0: no bucketing); table [2 span, D]"},
        {"max_relative_positions", "int", "512", "span without buckets, and the log-bucket range"},
        {"pos_att_type", "c2p|p2c | p2c|c2p | c2p | p2c", "c2p|p2c", "which disentangled terms are added"},
        {"share_att_key", "bool", "true", "project positions with the layer's q_proj / k_proj (else own projections)"},
        {"norm_rel_ebd", "layer_norm | none", "layer_norm", "LayerNorm the relative embeddings"},
        {"layer_norm_eps", "float", "1e-7", "epsilon of that LayerNorm"}}},
  };
  return t;
}
}  // namespace

const std::vector<PositionParamDoc>& position_param_docs(const std::string& variant) {
  find_position_variant(variant);  // throws for unknown names
  auto it = table().find(variant);
  RELPOS_CHECK(it != table().end(), "position encoding '{}' has no parameter documentation (nn/positional/param_docs.cpp)",
               variant);
  return it->second;
}

std::string position_params_markdown() {
  auto cell = [](std::string s) {  // a '|' inside a cell would end it
    std::string r;
    for (char c : s) r += c == '|' ? std::string("\\|") : std::string(1, c);
    return r;
  };
  std::string out = "| encoding | parameter | type | default | meaning |\n|---|---|---|---|---|\n";
  for (const auto& v : position_variants()) {
    const auto& docs = position_param_docs(v.name);
    if (docs.empty()) out += fmt::format("| `{}` | — | | | no parameters |\n", v.name);
    for (const auto& d : docs)
      out += fmt::format("| `{}` | `{}` | {} | {} | {} |\n", v.name, d.name, cell(d.type), cell(d.default_value), cell(d.meaning));
  }
  return out;
}

}  // namespace relpos::nn
