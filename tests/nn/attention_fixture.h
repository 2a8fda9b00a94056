// tests/nn/attention_fixture.h — builds a small float64 attention layer with a given
// position encoding, for gradchecks and equivalence tests.
#pragma once
#include <string>
#include <vector>

#include "nn/attention.h"
#include "nn/positional/registry.h"

namespace relpos::test {

struct AttnSetup {
  std::shared_ptr<nn::MultiHeadAttention> attn;
  int64_t D, H;
};

inline AttnSetup make_attention(const std::string& type, std::map<std::string, std::string> params = {},
                                int64_t H = 2, int64_t D = 8, bool bias_scale = false, uint64_t seed = 5,
                                DType dtype = DType::F64, double table_std = 0.5) {
  Generator gen(seed);
  nn::PositionConfig pc;
  pc.type = type;
  pc.d_model = D;
  pc.n_heads = H;
  pc.head_dim = D / H;
  pc.max_len = 64;
  pc.init_std = table_std;  // larger than the 0.02 default so gradchecks see real bias values
  pc.params = nn::PositionParams(params);
  pc.dtype = dtype;
  nn::AttentionConfig ac;
  ac.d_model = D;
  ac.n_heads = H;
  ac.bias_scale.enabled = bias_scale;
  ac.bias_scale.init = 0.7;
  ac.bias_scale.per_head = true;
  auto pos = nn::make_position_encoding(pc, gen);
  return {std::make_shared<nn::MultiHeadAttention>(ac, pos, true, gen, dtype), D, H};
}

}  // namespace relpos::test
