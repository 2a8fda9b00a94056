// Transformer-XL: golden values of the position term (hand values, closed form, and TXL's
// relative shift), float64 gradchecks, KV-cache equivalence, u/v sharing across layers,
// segment memory (memory of segment 1 + segment 2 == the concatenated pass) and detachment.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>

#include "../helpers.h"
#include "attention_fixture.h"
#include "nn/models.h"
#include "nn/optim/adam.h"
#include "nn/optim/clip.h"
#include "nn/optim/param_groups.h"
#include "experiments/inspect.h"

using namespace relpos;
using Catch::Contains;

namespace {

Variable param(const nn::Module& m, const std::string& name) {
  for (auto& [n, p] : m.named_parameters())
    if (n == name) return p;
  FAIL("no parameter " << name);
  return {};
}

bool has_name(const nn::Module& m, const std::string& name) {
  for (auto& [n, p] : m.named_parameters())
    if (n == name) return true;
  return false;
}

nn::PositionEncodingPtr make_txl(int64_t D, int64_t H, std::map<std::string, std::string> params = {}) {
  Generator gen(3);
  nn::PositionConfig pc;
  pc.type = "transformer_xl";
  pc.d_model = D;
  pc.n_heads = H;
  pc.head_dim = D / H;
  pc.max_len = 64;
  pc.init_std = 0.5;
  pc.params = nn::PositionParams(params);
  pc.dtype = DType::F64;
  return nn::make_position_encoding(pc, gen);
}

// R_d = [sin(d w_i) | cos(d w_i)], w_i = 10000^(-2i/D), written out independently of the code.
std::vector<double> sinusoid(double d, int64_t D) {
  std::vector<double> r(static_cast<size_t>(D));
  for (int64_t i = 0; i < D / 2; ++i) {
    r[size_t(i)] = std::sin(d / std::pow(10000.0, 2.0 * double(i) / double(D)));
    r[size_t(D / 2 + i)] = std::cos(d / std::pow(10000.0, 2.0 * double(i) / double(D)));
  }
  return r;
}

// Position embedding of head h at distance d: (R_d @ W_r)[h*dh : (h+1)*dh]; W_r: [D, H*dh].
std::vector<double> head_embedding(double d, const std::vector<double>& w_r, int64_t D, int64_t H, int64_t dh,
                                   int64_t h) {
  std::vector<double> R = sinusoid(d, D), out(size_t(dh), 0.0);
  for (int64_t c = 0; c < dh; ++c)
    for (int64_t m = 0; m < D; ++m) out[size_t(c)] += R[size_t(m)] * w_r[size_t(m * H * dh + h * dh + c)];
  return out;
}

nn::ModelConfig tiny(const std::string& pos, const std::string& norm = "pre") {
  nn::ModelConfig c;
  c.kind = nn::ModelKind::Decoder;
  c.vocab = 11;
  c.d_model = 8;
  c.n_layers = 2;
  c.n_heads = 2;
  c.d_ff = 16;
  c.max_len = 32;
  c.position = pos;
  c.position_std = 0.3;
  c.init_std = 0.5;
  c.norm = *parse_enum<nn::NormPlacement>(norm);
  c.dtype = DType::F64;
  if (pos == "t5") c.position_params = nn::PositionParams({{"num_buckets", "8"}, {"max_distance", "16"}});
  if (pos == "shaw") c.position_params = nn::PositionParams(std::map<std::string, std::string>{{"k_max", "3"}});
  return c;
}

// Tokens drawn from [lo, hi).
Tensor tokens(int64_t B, int64_t L, uint64_t seed, int64_t lo = 0, int64_t hi = 11) {
  Generator g(seed);
  std::vector<int64_t> v(size_t(B * L));
  for (auto& x : v) x = lo + int64_t(g.next_u64() % uint64_t(hi - lo));
  return Tensor::from_vector(v, {B, L});
}

}  // namespace

TEST_CASE("transformer_xl: position term golden values by hand (W_r = I, u = v = 0)", "[nn][txl][golden]") {
  // D = 4, H = 2, dh = 2: w = (1, 1/100), so with W_r = I head 0 sees (sin d, sin d/100) and
  // head 1 sees (cos d, cos d/100). q picks one component: head 0 -> sin d, head 1 -> cos(d/100).
  auto pos = make_txl(4, 2);
  param(*pos, "w_r").data().copy_(Tensor::from_vector(std::vector<double>{1, 0, 0, 0, 0, 1, 0, 0,  //
                                                                           0, 0, 1, 0, 0, 0, 0, 1},
                                                       {4, 4}));
  param(*pos, "u").data().fill_(0.0);
  param(*pos, "v").data().fill_(0.0);
  // Lq = 2 queries at 1, 2; Lk = 3 keys at 0, 1, 2 (one memory position): d = [[1, 0, -1], [2, 1, 0]].
  Tensor q = Tensor::from_vector(std::vector<double>{1, 0, 1, 0, 0, 1, 0, 1}, {1, 2, 2, 2});
  Tensor k = Tensor::zeros({1, 2, 3, 2}, DType::F64);
  nn::AttnGeometry g{2, 3, 1, 0, true};
  auto t = pos->score_terms(Variable(q), Variable(k), g).data().to_vector<double>();  // [1, 2, 2, 3]
  const double s1 = 0.8414709848078965, s2 = 0.9092974268256817;        // sin 1, sin 2
  const double c1 = 0.9999500004166653, c2 = 0.9998000066665778;        // cos .01, cos .02
  // Future key (d = -1) uses distance 0: sin 0 = 0, cos 0 = 1 (masked in attention anyway).
  const std::vector<double> want = {s1, 0, 0, s2, s1, 0,  // head 0: sin(d)
                                    c1, 1, 1, c2, c1, 1};  // head 1: cos(d / 100)
  for (size_t e = 0; e < want.size(); ++e) {
    INFO("cell " << e);
    REQUIRE(t[e] == Approx(want[e]).margin(1e-15));
  }
}

TEST_CASE("transformer_xl: score terms equal u.k_j + (q_i + v).(R_{qi-kj} W_r) in closed form", "[nn][txl][golden]") {
  const int64_t D = 8, H = 2, dh = 4, B = 2;
  for (int64_t clamp : {-1, 1}) {
    auto pos = clamp < 0 ? make_txl(D, H) : make_txl(D, H, {{"clamp_len", std::to_string(clamp)}});
    auto u = param(*pos, "u").data().to_vector<double>(), v = param(*pos, "v").data().to_vector<double>();
    auto w_r = param(*pos, "w_r").data().to_vector<double>();
    for (auto [Lq, Lk, qo, ko] : std::vector<std::array<int64_t, 4>>{{3, 5, 2, 0}, {4, 4, 0, 0}, {1, 6, 9, 4}}) {
      Variable q = test::rand_var({B, H, Lq, dh}, 7, -1, 1, false), k = test::rand_var({B, H, Lk, dh}, 8, -1, 1, false);
      nn::AttnGeometry g{Lq, Lk, qo, ko, true};
      auto got = pos->score_terms(q, k, g).data().to_vector<double>();
      auto qv = q.data().to_vector<double>(), kv = k.data().to_vector<double>();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < Lq; ++i)
            for (int64_t j = 0; j < Lk; ++j) {
              const int64_t d = (qo + i) - (ko + j);
              if (d < 0) continue;  // future key: masked
              const int64_t dc = clamp >= 0 ? std::min(d, clamp) : d;
              std::vector<double> r = head_embedding(double(dc), w_r, D, H, dh, h);
              double want = 0;
              for (int64_t c = 0; c < dh; ++c) {
                const double qc = qv[size_t(((b * H + h) * Lq + i) * dh + c)];
                const double kc = kv[size_t(((b * H + h) * Lk + j) * dh + c)];
                want += u[size_t(h * dh + c)] * kc + (qc + v[size_t(h * dh + c)]) * r[size_t(c)];
              }
              INFO("clamp " << clamp << " geometry " << Lq << "x" << Lk << " offsets " << qo << "," << ko << " cell "
                            << b << h << i << j);
              REQUIRE(got[size_t(((b * H + h) * Lq + i) * Lk + j)] == Approx(want).margin(1e-12));
            }
    }
  }
}

TEST_CASE("transformer_xl: the gather equals TXL's _rel_shift on every visible cell", "[nn][txl][golden]") {
  // The reference layout: qlen queries are the last of klen = mlen + qlen keys; pos_seq =
  // klen-1 .. 0; BD_raw[i, r] = (q_i + v) . r_{pos_seq[r]}; BD = _rel_shift(BD_raw) (zero column
  // in front, view as [klen+1, qlen], drop the first row, view as [qlen, klen]).
  const int64_t D = 8, H = 2, dh = 4, qlen = 3, mlen = 2, klen = mlen + qlen;
  auto pos = make_txl(D, H);
  auto u = param(*pos, "u").data().to_vector<double>(), v = param(*pos, "v").data().to_vector<double>();
  auto w_r = param(*pos, "w_r").data().to_vector<double>();
  Variable q = test::rand_var({1, H, qlen, dh}, 17, -1, 1, false);
  Variable k = test::rand_var({1, H, klen, dh}, 18, -1, 1, false);
  auto qv = q.data().to_vector<double>(), kv = k.data().to_vector<double>();
  auto got = pos->score_terms(q, k, nn::AttnGeometry{qlen, klen, mlen, 0, true}).data().to_vector<double>();
  for (int64_t h = 0; h < H; ++h) {
    std::vector<double> padded(size_t(qlen * (klen + 1)), 0.0);  // [qlen, klen + 1], column 0 = 0
    for (int64_t i = 0; i < qlen; ++i)
      for (int64_t r = 0; r < klen; ++r) {
        std::vector<double> e = head_embedding(double(klen - 1 - r), w_r, D, H, dh, h);
        double s = 0;
        for (int64_t c = 0; c < dh; ++c)
          s += (qv[size_t((h * qlen + i) * dh + c)] + v[size_t(h * dh + c)]) * e[size_t(c)];
        padded[size_t(i * (klen + 1) + 1 + r)] = s;
      }
    // view as [klen + 1, qlen] and drop row 0 == skip the first qlen elements of the flat array
    std::vector<double> bd(padded.begin() + qlen, padded.end());  // view as [qlen, klen]
    for (int64_t i = 0; i < qlen; ++i)
      for (int64_t j = 0; j <= i + mlen; ++j) {  // visible keys (the reference masks the rest)
        double ac = 0;
        for (int64_t c = 0; c < dh; ++c) ac += u[size_t(h * dh + c)] * kv[size_t((h * klen + j) * dh + c)];
        INFO("head " << h << " i " << i << " j " << j);
        REQUIRE(got[size_t((h * qlen + i) * klen + j)] == Approx(bd[size_t(i * klen + j)] + ac).margin(1e-12));
      }
  }
}

TEST_CASE("transformer_xl: float64 gradcheck through attention (inputs, u, v, W_r, alpha)", "[nn][txl][gradcheck]") {
  for (auto params : std::vector<std::map<std::string, std::string>>{{}, {{"clamp_len", "2"}}}) {
    auto s = test::make_attention("transformer_xl", params, 2, 8, /*bias_scale=*/true);
    std::vector<Variable> weights;
    for (auto& p : s.attn->parameters()) weights.push_back(p);
    REQUIRE(weights.size() == 4 * 2 + 3 + 1);  // q/k/v/o weight+bias, u v w_r, alpha
    {  // causal self-attention
      Variable x = test::rand_var({2, 5, 8}, 11);
      std::vector<Variable> in{x};
      in.insert(in.end(), weights.begin(), weights.end());
      test::require_gradcheck(
          "txl self",
          [&](const std::vector<Variable>& v) { return s.attn->forward({.xq = v[0], .xkv = v[0], .causal = true}); },
          in);
    }
    {  // memory layout: queries 4..6 over keys 0..6, key padding
      Variable xq = test::rand_var({2, 3, 8}, 12), xkv = test::rand_var({2, 7, 8}, 13);
      Tensor pad = Tensor::zeros({2, 7}, DType::F64);
      pad.select(0, 1).narrow(0, 0, 2).fill_(1.0);  // batch 1: first two memory keys are padding
      std::vector<Variable> in{xq, xkv};
      in.insert(in.end(), weights.begin(), weights.end());
      test::require_gradcheck(
          "txl memory",
          [&](const std::vector<Variable>& v) {
            return s.attn->forward({.xq = v[0], .xkv = v[1], .causal = true, .key_padding = pad, .q_offset = 4});
          },
          in);
    }
  }
}

TEST_CASE("transformer_xl: relpos gradcheck cases run and pass (causal self and causal cross geometry)",
          "[nn][txl][gradcheck]") {
  auto cases = inspect::attention_gradchecks("transformer_xl");
  REQUIRE(cases.size() == 2);  // the bidirectional case is skipped (causal_only)
  REQUIRE_THAT(cases[0].label, Contains("causal self-attention"));
  REQUIRE_THAT(cases[1].label, Contains("cross-attention") && Contains("causal"));
  for (auto& c : cases) {
    INFO(c.report.str());
    REQUIRE(c.report.ok);
  }
}

TEST_CASE("transformer_xl: token-by-token decoding with a KV cache equals the full pass", "[nn][txl][kvcache]") {
  auto s = test::make_attention("transformer_xl", {}, 2, 8, true);
  s.attn->eval();
  Variable x = test::rand_var({2, 6, 8}, 31, -1, 1, false);
  Tensor full = s.attn->forward({.xq = x, .xkv = x, .causal = true}).data();
  nn::KVCache cache;
  std::vector<Tensor> steps;
  steps.push_back(
      s.attn->forward({.xq = narrow(x, 1, 0, 2), .xkv = narrow(x, 1, 0, 2), .causal = true}, {.cache = &cache}).data());
  for (int64_t t = 2; t < 6; ++t) {
    Variable xt = narrow(x, 1, t, 1);
    steps.push_back(
        s.attn->forward({.xq = xt, .xkv = xt, .causal = true, .q_offset = t, .k_offset = t}, {.cache = &cache}).data());
  }
  REQUIRE(test::allclose(k::cat(steps, 1), full, 1e-10, 1e-12));

  nn::Model m(tiny("transformer_xl"));
  m.eval();
  Tensor toks = tokens(2, 7, 3);
  Tensor ref = m.forward(toks).data();
  nn::DecodeState st;
  std::vector<Tensor> out{m.decode_step(toks.narrow(1, 0, 3).contiguous(), st).data()};
  for (int64_t t = 3; t < 7; ++t) out.push_back(m.decode_step(toks.narrow(1, t, 1).contiguous(), st).data());
  REQUIRE(test::allclose(k::cat(out, 1), ref, 1e-10, 1e-12));
}

TEST_CASE("transformer_xl: causal only, bidirectional use is rejected", "[nn][txl]") {
  auto s = test::make_attention("transformer_xl");
  Variable x = test::rand_var({1, 3, 8}, 1);
  REQUIRE_THROWS_WITH(s.attn->forward({.xq = x, .xkv = x}),
                      Contains("transformer_xl") && Contains("only works with causal attention"));
  auto c = tiny("transformer_xl");
  c.kind = nn::ModelKind::Encoder;
  REQUIRE_THROWS_WITH(nn::Model(c), Contains("causal-only") && Contains("encoder"));
  c.kind = nn::ModelKind::EncoderDecoder;
  REQUIRE_THROWS_WITH(nn::Model(c), Contains("causal-only"));
  REQUIRE_THROWS_WITH(make_txl(8, 2, {{"clamp_len", "-3"}}), Contains("clamp_len"));
  REQUIRE_THROWS_WITH(make_txl(8, 2, {{"clamp_length", "3"}}), Contains("did you mean 'clamp_len'"));
}

TEST_CASE("transformer_xl: u, v shared by the stack, W_r per layer, untied with position_shared=false",
          "[nn][txl][models]") {
  nn::Model m(tiny("transformer_xl"));
  REQUIRE(has_name(m, "stack.pos.u"));
  REQUIRE(has_name(m, "stack.pos.v"));
  REQUIRE_FALSE(has_name(m, "stack.pos.w_r"));
  REQUIRE(has_name(m, "stack.layers.0.attn.pos.w_r"));
  REQUIRE(has_name(m, "stack.layers.1.attn.pos.w_r"));
  REQUIRE_FALSE(has_name(m, "stack.layers.0.attn.pos.u"));
  REQUIRE(m.parameters_in_group(nn::group::kPosition).size() == 4);  // u, v, 2 x W_r
  REQUIRE(param(m, "stack.pos.u").shape() == Shape{2, 4});
  REQUIRE(param(m, "stack.layers.1.attn.pos.w_r").shape() == Shape{8, 8});

  Tensor x = tokens(2, 6, 1);
  Variable logits = m.forward(x);
  sum(logits * logits).backward();

  auto c = tiny("transformer_xl");
  c.position_shared = false;
  nn::Model untied(c);
  for (const char* n : {"stack.layers.0.attn.pos.u", "stack.layers.1.attn.pos.v", "stack.layers.1.attn.pos.w_r"})
    REQUIRE(has_name(untied, n));
  REQUIRE_FALSE(has_name(untied, "stack.pos.u"));
  REQUIRE(untied.parameters_in_group(nn::group::kPosition).size() == 6);

  // Give the untied model the tied model's values (both layers' u, v = the shared u, v): same
  // output, and the shared u, v collect the sum of what the two layers' copies collect.
  auto tied_name = [](std::string n) {
    for (const char* t : {"u", "v"})
      for (const char* l : {"0", "1"})
        if (n == std::string("stack.layers.") + l + ".attn.pos." + t) return std::string("stack.pos.") + t;
    return n;
  };
  for (auto& [n, p] : untied.named_parameters()) p.data().copy_(param(m, tied_name(n)).data());
  Variable logits_untied = untied.forward(x);
  REQUIRE(test::allclose(logits_untied.data(), logits.data(), 1e-12, 1e-12));
  sum(logits_untied * logits_untied).backward();
  for (const char* t : {"u", "v"}) {
    Tensor g0 = param(untied, std::string("stack.layers.0.attn.pos.") + t).grad();
    Tensor g1 = param(untied, std::string("stack.layers.1.attn.pos.") + t).grad();
    INFO(t);
    REQUIRE(k::sum(k::unary(k::Unary::Abs, g0)).item() > 0);
    REQUIRE(k::sum(k::unary(k::Unary::Abs, g1)).item() > 0);
    REQUIRE(test::allclose(param(m, std::string("stack.pos.") + t).grad(), k::add(g0, g1), 1e-10, 1e-12));
  }
  REQUIRE(test::allclose(param(m, "stack.layers.1.attn.pos.w_r").grad(),
                         param(untied, "stack.layers.1.attn.pos.w_r").grad(), 1e-10, 1e-12));
}

TEST_CASE("transformer_xl: full-model float64 gradcheck (2 layers sharing u, v)", "[nn][txl][models][gradcheck]") {
  auto cfg = tiny("transformer_xl");
  cfg.bias_scale = {true, true, 0.5, true};
  nn::Model m(cfg);
  Tensor x = tokens(2, 5, 7);
  test::require_gradcheck("decoder transformer_xl", [&](const std::vector<Variable>&) { return m.forward(x); },
                          m.parameters());
}

TEST_CASE("segment memory: segment 2 with the memory of segment 1 equals the concatenated pass",
          "[nn][txl][memory]") {
  // Keys of the memory sit at 0..M-1 and the segment's queries at M..: exactly the positions
  // of the concatenated causal pass, whose layer inputs for segment 1 are the memory.
  for (std::string pos : {"transformer_xl", "none", "t5", "alibi", "rope", "shaw"})
    for (std::string norm : {"pre", "post"}) {
      nn::Model m(tiny(pos, norm));
      Tensor s1 = tokens(2, 4, 41), s2 = tokens(2, 3, 42), s3 = tokens(2, 2, 43);
      Tensor full = m.forward(k::cat({s1, s2, s3}, 1)).data();  // [2, 9, V]
      nn::SegmentMemory mem(/*mem_len=*/4);
      Tensor l1 = m.forward_with_memory(s1, mem).data();
      REQUIRE(mem.length() == 4);
      Tensor l2 = m.forward_with_memory(s2, mem).data();
      INFO(pos << " " << norm);
      REQUIRE(test::allclose(l1, full.narrow(1, 0, 4).contiguous(), 1e-10, 1e-10));
      REQUIRE(test::allclose(l2, full.narrow(1, 4, 3).contiguous(), 1e-10, 1e-10));
      // A memory holding both previous segments: segment 3 equals the concatenation of all three.
      nn::SegmentMemory long_mem(7);
      m.forward_with_memory(s1, long_mem);
      m.forward_with_memory(s2, long_mem);
      REQUIRE(long_mem.length() == 7);
      Tensor l3 = m.forward_with_memory(s3, long_mem).data();
      REQUIRE(test::allclose(l3, full.narrow(1, 7, 2).contiguous(), 1e-10, 1e-10));
      REQUIRE(long_mem.length() == 7);  // the last 7 of 9 positions
    }
}

TEST_CASE("segment memory: keeps the last mem_len layer inputs, mem_len 0 keeps nothing", "[nn][txl][memory]") {
  nn::Model m(tiny("transformer_xl"));
  Tensor s1 = tokens(2, 3, 51), s2 = tokens(2, 3, 52);
  // Layer inputs over all 6 positions, from one pass over the concatenation.
  nn::SegmentMemory all(6);
  m.forward_with_memory(k::cat({s1, s2}, 1), all);
  REQUIRE(all.layers.size() == 2);
  nn::SegmentMemory mem(4);
  m.forward_with_memory(s1, mem);
  REQUIRE(mem.length() == 3);
  m.forward_with_memory(s2, mem);
  REQUIRE(mem.length() == 4);
  for (size_t l = 0; l < 2; ++l)
    REQUIRE(test::allclose(mem.layers[l], all.layers[l].narrow(1, 2, 4).contiguous(), 1e-10, 1e-12));
  // Segment 3 with the truncated memory equals segment 3 given that memory built by hand.
  Tensor s3 = tokens(2, 2, 53);
  nn::SegmentMemory by_hand(4);
  for (size_t l = 0; l < 2; ++l) by_hand.layers.push_back(all.layers[l].narrow(1, 2, 4).contiguous());
  nn::SegmentMemory copy = mem;
  REQUIRE(test::allclose(m.forward_with_memory(s3, copy).data(), m.forward_with_memory(s3, by_hand).data(), 1e-10,
                         1e-12));

  nn::SegmentMemory none(0);
  m.forward_with_memory(s1, none);
  REQUIRE(none.length() == 0);
  Tensor b = m.forward_with_memory(s2, none).data();
  REQUIRE(test::allclose(b, m.forward(s2).data(), 1e-12, 1e-12));

  nn::Model absolute(tiny("learned"));
  nn::SegmentMemory mm(4);
  REQUIRE_THROWS_WITH(absolute.forward_with_memory(s1, mm),
                      Contains("relative position encoding") && Contains("learned"));
  nn::SegmentMemory wrong(4);
  m.forward_with_memory(s1, wrong);
  REQUIRE_THROWS_WITH(m.forward_with_memory(tokens(1, 3, 1), wrong), Contains("batch"));
}

TEST_CASE("segment memory is detached: no gradient reaches segment 1's computation", "[nn][txl][memory][gradcheck]") {
  nn::Model m(tiny("transformer_xl"));
  // Segment 1 uses tokens 0..4 only, segment 2 tokens 5..10 only: embedding rows 0..4 can get
  // gradient from a loss on segment 2 only through segment 1's computation.
  Tensor s1 = tokens(2, 4, 61, 0, 5), s2 = tokens(2, 3, 62, 5, 11);
  auto rows_0_4 = [&] {
    Tensor g = param(m, "stack.embed.weight").grad();
    return g.defined() ? k::sum(k::unary(k::Unary::Abs, g.narrow(0, 0, 5))).item() : 0.0;
  };
  // Concatenated pass, loss on the segment-2 positions: rows 0..4 do get gradient (through the
  // keys/values of segment 1), so the check below can fail.
  {
    Variable full = m.forward(k::cat({s1, s2}, 1));
    Variable l = narrow(full, 1, 4, 3);
    sum(l * l).backward();
    REQUIRE(rows_0_4() > 1e-6);
    m.zero_grad();
  }
  nn::SegmentMemory mem(4);
  m.forward_with_memory(s1, mem);  // no backward through segment 1
  for (const Tensor& t : mem.layers) REQUIRE(t.defined());
  nn::SegmentMemory mem2 = mem;
  Variable l2 = m.forward_with_memory(s2, mem2);
  sum(l2 * l2).backward();
  REQUIRE(rows_0_4() == 0.0);
  REQUIRE(k::sum(k::unary(k::Unary::Abs, param(m, "stack.embed.weight").grad())).item() > 0);
  m.zero_grad();

  // With the memory held fixed, the gradient of segment 2's output w.r.t. every parameter is
  // exactly the finite-difference gradient of that function: the memory contributes values
  // but no gradient path (a leak through segment 1 would make analytic != numeric).
  test::require_gradcheck("segment 2 with fixed memory", [&](const std::vector<Variable>&) {
    nn::SegmentMemory fixed = mem;
    return m.forward_with_memory(s2, fixed);
  }, m.parameters());
}

TEST_CASE("segment memory: a decoder trained on segments uses its memory (copy from the previous segment)",
          "[nn][txl][memory][train]") {
  // Each example is 4 random tokens repeated: inputs [r1..r4 | r1..r4], targets shifted by one.
  // Segment 2's targets are only predictable from segment 1 (distance 3 back), i.e. through
  // the memory. Bounds stated before running: uniform guessing costs ln(11) = 2.40 nats; after
  // training, segment 2 must cost < 0.5 nats with memory and stay > 1.5 nats without it.
  nn::ModelConfig c;
  c.kind = nn::ModelKind::Decoder;
  c.vocab = 11;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.d_ff = 64;
  c.max_len = 16;
  c.position = "transformer_xl";
  nn::Model m(c, 4);
  nn::optim::AdamOptions o;
  o.lr = 3e-3;
  nn::optim::AdamW opt(nn::optim::param_groups_by_tag(m, 0.01), o);
  const int64_t B = 16, L = 4;
  auto batch = [&](uint64_t seed) {
    Generator g(seed);
    std::vector<int64_t> v(size_t(B * (2 * L + 1)));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < 2 * L + 1; ++t)
        v[size_t(b * (2 * L + 1) + t)] = t < L ? int64_t(g.next_u64() % 11) : v[size_t(b * (2 * L + 1) + t - L)];
    Tensor s = Tensor::from_vector(v, {B, 2 * L + 1});
    auto part = [&](int64_t start) { return s.narrow(1, start, L).contiguous(); };
    return std::array<Tensor, 4>{part(0), part(L), part(1).view({-1}), part(L + 1).view({-1})};
  };
  auto ce = [](const Variable& logits, const Tensor& y) { return cross_entropy(reshape(logits, {-1, 11}), y); };
  for (int step = 0; step < 300; ++step) {
    auto [x1, x2, y1, y2] = batch(1000 + uint64_t(step));
    nn::SegmentMemory mem(L);
    Variable loss = ce(m.forward_with_memory(x1, mem), y1) + ce(m.forward_with_memory(x2, mem), y2);
    opt.zero_grad();
    loss.backward();
    nn::optim::clip_grad_norm(m.parameters(), 1.0);
    opt.step();
  }
  m.eval();
  auto [x1, x2, y1, y2] = batch(7);  // unseen
  nn::SegmentMemory mem(L), none(0);
  m.forward_with_memory(x1, mem);
  const double with_memory = ce(m.forward_with_memory(x2, mem), y2).item();
  const double without = ce(m.forward_with_memory(x2, none), y2).item();
  INFO("segment 2 loss with memory " << with_memory << ", without " << without);
  REQUIRE(with_memory < 0.5);
  REQUIRE(without > 1.5);
}
