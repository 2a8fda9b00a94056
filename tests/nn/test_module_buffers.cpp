// Every tensor a layer computes with is a parameter or a registered buffer, so Module::to()
// moves it with the rest (a bare Variable stays on the CPU, and the first call on cuda
// throws "inputs on different devices"). Buffers are not in state_dict: registering one
// keeps checkpoints (and python/relpos_torch, which keeps the same tensors as
// non-persistent buffers) unchanged.
#include <catch2/catch.hpp>

#include <algorithm>

#include "../helpers.h"
#include "../nn/attention_fixture.h"
#include "nn/models.h"

using namespace relpos;

namespace {
template <typename Named>
bool lists(const Named& named, const std::string& name, const Variable& v) {
  return std::any_of(named.begin(), named.end(), [&](const auto& nv) {
    return nv.first == name && nv.second.data().raw_data() == v.data().raw_data();
  });
}
}  // namespace

TEST_CASE("module: a non-learnable bias scale is a buffer (moved by to(), not in state_dict)", "[nn][module][bias_scale]") {
  for (bool learnable : {false, true}) {
    Generator gen(1);
    nn::PositionConfig pc;
    pc.type = "t5";
    pc.d_model = 8;
    pc.n_heads = 2;
    pc.head_dim = 4;
    pc.max_len = 16;
    nn::AttentionConfig ac;
    ac.d_model = 8;
    ac.n_heads = 2;
    ac.bias_scale = {true, learnable, 0.7, true};
    nn::MultiHeadAttention attn(ac, nn::make_position_encoding(pc, gen), true, gen, DType::F64);
    const Variable& alpha = attn.bias_scale();
    REQUIRE(alpha.defined());
    INFO("learnable " << learnable);
    CHECK(lists(attn.named_parameters(), "bias_scale", alpha) == learnable);
    CHECK(lists(attn.named_buffers(), "bias_scale", alpha) == !learnable);
    const auto sd = attn.state_dict();
    CHECK(std::any_of(sd.begin(), sd.end(), [](const auto& kv) { return kv.first == "bias_scale"; }) == learnable);
  }
}

TEST_CASE("module: named_buffers() lists the buffers of submodules under dotted names", "[nn][module]") {
  nn::ModelConfig c;
  c.kind = nn::ModelKind::Decoder;
  c.vocab = 11;
  c.d_model = 8;
  c.n_layers = 2;
  c.n_heads = 2;
  c.d_ff = 16;
  c.max_len = 32;
  c.dtype = DType::F64;
  c.position = "alibi";  // fixed slopes: a buffer
  c.bias_scale = {true, false, 0.5, true};
  nn::Model m(c);
  std::vector<std::string> names;
  for (const auto& [n, b] : m.named_buffers()) names.push_back(n);
  INFO(Catch::Detail::stringify(names));
  for (const char* n : {"stack.layers.0.attn.bias_scale", "stack.layers.1.attn.bias_scale"})
    CHECK(std::count(names.begin(), names.end(), n) == 1);
  CHECK(std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.find("slopes") != std::string::npos; }));
  // state_dict is the parameters only: the same keys as with the bias scale off
  nn::ModelConfig off = c;
  off.bias_scale.enabled = false;
  nn::Model m_off(off);
  std::vector<std::string> keys, keys_off;
  for (const auto& [n, t] : m.state_dict()) keys.push_back(n);
  for (const auto& [n, t] : m_off.state_dict()) keys_off.push_back(n);
  CHECK(keys == keys_off);
}
