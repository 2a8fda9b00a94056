// tests/kernels/test_fused_attention.cpp — k::attention / fused_attention against the
// materialised composition of ops it replaces (scores, Toeplitz bias, masks, softmax, P V),
// float64 gradchecks of every input (q, k, v, bias table), determinism across thread counts,
// and whole attention layers with the fused path on vs off for every encoding it serves
// (Toeplitz, bucketed and index-bias encodings).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <map>

#include "../helpers.h"
#include "autograd/ops.h"
#include "core/float16.h"
#include "kernels/cpu/tile_gemm.h"
#include "kernels/ops.h"
#include "nn/attention.h"
#include "nn/positional/graph_spd.h"
#include "nn/positional/registry.h"

using namespace relpos;
using test::rand_var;

namespace {

// The unfused reference: softmax(scale q k^T + toeplitz(bias) + masks) v, as ops.
Variable reference(const Variable& q, const Variable& k, const Variable& v, const Variable& bias, const Tensor& kp,
                   const k::AttentionArgs& a) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  Variable s = matmul(q, transpose(k, -1, -2)) * a.scale;
  if (bias.defined()) s = add_toeplitz_bias(s, bias);
  if (kp.defined()) s = masked_fill(s, kp.to(q.dtype()).view({q.size(0), 1, 1, k.size(2)}), kNegInf);
  if (a.causal) s = causal_fill(s, a.q_offset, a.k_offset, kNegInf);
  return matmul(softmax(s, -1), v);
}

struct Case {
  int64_t B, H, Lq, Lk, dh;
  bool causal, bias, padding;
  int64_t q_off, k_off;
};

// The position config of the layer-level parity tests (d_model 16, 4 heads, float64); Shaw
// clipped at |d| > 3 so that its edge buckets are exercised.
nn::PositionConfig layer_position(const char* type) {
  nn::PositionConfig pc;
  pc.type = type;
  if (std::string(type) == "shaw") pc.params = nn::PositionParams(std::map<std::string, std::string>{{"k_max", "3"}});
  pc.d_model = 16;
  pc.n_heads = 4;
  pc.head_dim = 4;
  pc.max_len = 64;
  pc.dtype = DType::F64;
  return pc;
}

// Backpropagates one random upstream gradient (seeded) through the fused output and the
// reference output in turn; every input's two gradients must agree.
void require_same_gradients(Variable& fused, Variable& ref, const std::vector<Variable*>& inputs, uint64_t seed) {
  Generator gen(seed);
  Tensor g = Tensor::randn(fused.shape(), gen, DType::F64);
  fused.backward(g);
  std::vector<Tensor> fg;
  for (Variable* x : inputs) fg.push_back(x->grad()), x->zero_grad();
  ref.backward(g);
  for (size_t i = 0; i < inputs.size(); ++i) {
    INFO("gradient of input " << i);
    REQUIRE(test::allclose(fg[i], inputs[i]->grad(), 1e-10, 1e-12));
  }
}

// A fresh attention layer (d_model 16, seed 3) on the fused or the reference path, its forward
// on a fixed x [2, 11, 16] + backward (upstream gradient ones), and everything the parity
// tests compare: output, input gradient, the two monitors, every parameter gradient (all
// required to exist when every_param_has_grad; alpha has none where nothing uses it).
std::vector<Tensor> layer_outputs(bool fused, const nn::PositionConfig& pc, const nn::AttentionConfig& ac,
                                  bool causal, const Tensor& kp, const Tensor& index, bool every_param_has_grad,
                                  bool* formed_probs = nullptr) {
  nn::set_fused_attention(fused);
  Generator g(3);
  auto pos = nn::make_position_encoding(pc, g);
  nn::MultiHeadAttention attn(ac, pos, true, g, DType::F64);
  Variable x = rand_var({2, 11, 16}, 4);
  nn::AttentionStats st;
  Variable y =
      attn.forward({.xq = x, .xkv = x, .causal = causal, .key_padding = kp, .position_index = index}, {.stats = &st});
  y.backward(Tensor::ones(y.shape(), DType::F64));
  if (formed_probs) *formed_probs = st.probs.defined();
  std::vector<Tensor> out{y.data(), x.grad(), Tensor::scalar(st.max_abs_logit, DType::F64),
                          Tensor::scalar(st.mean_entropy, DType::F64)};  // monitors: kernel vs materialised
  for (auto& [n, p] : attn.named_parameters()) {
    INFO(n);
    if (every_param_has_grad) CHECK(p.grad().defined());
    if (p.grad().defined()) out.push_back(p.grad());
  }
  return out;
}

void require_same_outputs(const std::vector<Tensor>& on, const std::vector<Tensor>& off) {
  REQUIRE(on.size() == off.size());
  for (size_t i = 0; i < on.size(); ++i) {
    INFO("tensor " << i);
    CHECK(test::allclose(on[i], off[i], 1e-10, 1e-12));
  }
}

}  // namespace

TEST_CASE("fused attention equals the materialised ops, values and all four gradients") {
  const Case cases[] = {
      {2, 3, 5, 5, 4, true, true, false, 0, 0},
      {1, 2, 7, 7, 3, false, true, false, 0, 0},
      {2, 2, 3, 9, 4, true, true, false, 6, 0},
      {2, 1, 70, 70, 5, true, true, false, 0, 0},  // > one row block
      {2, 2, 6, 6, 4, false, false, true, 0, 0},
      {1, 2, 1, 8, 4, true, true, false, 7, 0},  // decode step
      {2, 2, 130, 67, 3, false, true, true, 0, 0},
      {1, 1, 4, 4, 2, true, false, false, 0, 0},
      // more than one key tile (256 keys): the online softmax rescales across tiles
      {1, 2, 600, 600, 3, true, true, false, 0, 0},
      {1, 1, 70, 530, 4, false, true, true, 0, 0},
      {1, 2, 100, 400, 3, false, true, true, 0, 0},  // 32-row blocks (row_block: <= 512 keys), two key tiles
      {2, 1, 40, 40, 4, true, true, true, 0, 0},     // 32-row blocks: a full block, then an 8-row tail
      {1, 2, 3, 700, 3, true, true, false, 697, 0},  // decode steps against a long cache
      // keys start 2 positions after the queries: a block of 3 rows whose only visible key is
      // one (a 1-key tile, so dK's product has one row and unit strides)
      {1, 2, 3, 5, 4, true, true, false, 0, 2},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    INFO("B " << c.B << " H " << c.H << " Lq " << c.Lq << " Lk " << c.Lk << " causal " << c.causal << " bias "
              << c.bias << " padding " << c.padding << " q_off " << c.q_off);
    Variable q = rand_var({c.B, c.H, c.Lq, c.dh}, seed++), k = rand_var({c.B, c.H, c.Lk, c.dh}, seed++),
             v = rand_var({c.B, c.H, c.Lk, c.dh}, seed++);
    Variable bias = c.bias ? rand_var({c.H, c.Lq + c.Lk - 1}, seed++) : Variable();
    Tensor kp;
    if (c.padding) {
      std::vector<int64_t> pad(size_t(c.B * c.Lk), 0);
      for (int64_t b = 0; b < c.B; ++b) pad[size_t(b * c.Lk + c.Lk - 1 - b)] = 1;  // one hidden key per row
      kp = Tensor::from_vector(pad, {c.B, c.Lk});
    }
    const k::AttentionArgs a{0.7, c.causal, c.q_off, c.k_off};
    Variable fo = fused_attention(q, k, v, bias, kp, a), ro = reference(q, k, v, bias, kp, a);
    REQUIRE(test::allclose(fo.data(), ro.data(), 1e-12, 1e-13));
    Generator gen(seed++);
    Tensor g = Tensor::randn(fo.shape(), gen, DType::F64);
    fo.backward(g);
    std::vector<Tensor> fused_grads{q.grad(), k.grad(), v.grad()};
    if (c.bias) fused_grads.push_back(bias.grad());
    for (Variable* x : {&q, &k, &v, &bias})
      if (x->defined()) x->zero_grad();
    ro.backward(g);
    std::vector<Tensor> ref_grads{q.grad(), k.grad(), v.grad()};
    if (c.bias) ref_grads.push_back(bias.grad());
    for (size_t i = 0; i < ref_grads.size(); ++i) {
      INFO("gradient of input " << i);
      REQUIRE(test::allclose(fused_grads[i], ref_grads[i], 1e-10, 1e-12));
    }
  }
}

TEST_CASE("fused attention gradcheck (float64): q, k, v and the bias table") {
  Variable q = rand_var({2, 2, 5, 3}, 21), k = rand_var({2, 2, 6, 3}, 22), v = rand_var({2, 2, 6, 3}, 23);
  Variable bias = rand_var({2, 10}, 24);
  for (bool causal : {true, false})
    test::require_gradcheck("fused_attention", [&](const std::vector<Variable>& in) {
      return fused_attention(in[0], in[1], in[2], in[3], Tensor(), k::AttentionArgs{0.5, causal, 1, 0});
    }, {q, k, v, bias});
}

TEST_CASE("fused attention: float32 close to float64, rows without a visible key give 0, bad shapes are named") {
  Generator g(5);
  Tensor q = Tensor::randn({1, 2, 9, 4}, g, DType::F64), kk = Tensor::randn({1, 2, 9, 4}, g, DType::F64),
         v = Tensor::randn({1, 2, 9, 4}, g, DType::F64), t = Tensor::randn({2, 17}, g, DType::F64);
  k::AttentionArgs a{0.5, true, 0, 0};
  auto o64 = k::attention(q, kk, v, t, Tensor(), a);
  auto o32 = k::attention(q.to(DType::F32), kk.to(DType::F32), v.to(DType::F32), t.to(DType::F32), Tensor(), a);
  CHECK(test::allclose(o32.o, o64.o, 1e-4, 1e-5));
  // keys start after the queries: nothing visible
  auto none = k::attention(q, kk, v, t, Tensor(), k::AttentionArgs{0.5, true, 0, 20});
  CHECK(k::sum_squares(none.o).item() == 0.0);
  CHECK(std::isinf(none.lse.at({0, 0, 0})));
  CHECK_THROWS_WITH(k::attention(q, kk, v, Tensor::zeros({2, 5}, DType::F64), Tensor(), a),
                    Catch::Contains("bias must be [H, Lq + Lk - 1] = [2, 17]"));
  CHECK_THROWS_WITH(k::attention(q, kk.narrow(3, 0, 3), v, Tensor(), Tensor(), a), Catch::Contains("[B, H, Lk, dh]"));
}

TEST_CASE("fused attention backward is the same at 1 and 2 threads (deterministic bias gradient)") {
  Generator g(8);
  Tensor q = Tensor::randn({3, 2, 100, 8}, g), kk = Tensor::randn({3, 2, 100, 8}, g), v = Tensor::randn({3, 2, 100, 8}, g),
         t = Tensor::randn({2, 199}, g), go = Tensor::randn({3, 2, 100, 8}, g);
  k::AttentionArgs a{0.35, true, 0, 0};
  const int before = k::num_threads();
  k::set_num_threads(1);
  auto f1 = k::attention(q, kk, v, t, Tensor(), a);
  auto b1 = k::attention_backward(go, q, kk, v, t, Tensor(), f1, a);
  k::set_num_threads(2);
  auto f2 = k::attention(q, kk, v, t, Tensor(), a);
  auto b2 = k::attention_backward(go, q, kk, v, t, Tensor(), f2, a);
  k::set_num_threads(before);
  CHECK(f1.o.to_vector<float>() == f2.o.to_vector<float>());
  CHECK(b1.dbias.to_vector<float>() == b2.dbias.to_vector<float>());
  CHECK(b1.dk.to_vector<float>() == b2.dk.to_vector<float>());
}

TEST_CASE("fused attention writes every element of o, dq, dk, dv: NaN left in reused memory never shows") {
  // Keys seen by no query (causal, queries 0..5 against keys 0..11; one padded key) get dK = dV
  // = 0, and every other element is a sum the kernel starts from zero itself (each thread zeroes
  // the (b, h) it accumulates). The allocator's cache hands back freed blocks of the same size:
  // NaN-filled ones first, so a missed element shows.
  for (DType dt : {DType::F32, DType::F64}) {
    INFO(dtype_name(dt));
    Generator g(12);
    const int64_t B = 2, H = 3, Lq = 6, Lk = 12, dh = 40;                   // dh > 32: a masked tail in each row
    Tensor q = Tensor::randn({B, Lq, H, dh}, g, dt).permute({0, 2, 1, 3});  // the heads layout the model hands over
    Tensor kk = Tensor::randn({B, H, Lk, dh}, g, dt), v = Tensor::randn({B, H, Lk, dh}, g, dt);
    Tensor go = Tensor::randn({B, H, Lq, dh}, g, dt);
    Tensor kp = Tensor::from_vector(std::vector<int64_t>{0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                                                         0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
                                    {B, Lk});
    const k::AttentionArgs a{0.3, true, 0, 0};
    const auto run = [&] {
      auto f = k::attention(q, kk, v, Tensor(), kp, a);
      auto b = k::attention_backward(go, q, kk, v, Tensor(), kp, f, a);
      return std::vector<Tensor>{f.o, b.dq, b.dk, b.dv};
    };
    const std::vector<Tensor> clean = run();
    for (int rep = 0; rep < 2; ++rep) {
      {  // NaN blocks of each output's size into the cache
        std::vector<Tensor> poison;
        for (int64_t L : {Lq, Lk, Lk, Lk})
          for (int i = 0; i < 3; ++i) poison.push_back(Tensor::full({B, L, H, dh}, std::nan(""), dt));
      }
      const std::vector<Tensor> out = run();
      for (size_t i = 0; i < out.size(); ++i) {
        INFO("output " << i << " (o, dq, dk, dv)");
        const std::vector<double> x = out[i].to_vector<double>(), y = clean[i].to_vector<double>();
        CHECK(std::all_of(x.begin(), x.end(), [](double e) { return std::isfinite(e); }));
        CHECK(x == y);
      }
      for (const Tensor& d : {out[2], out[3]}) {  // dk, dv: keys 6.. seen by no query, key 2 of batch 0 padded
        CHECK(k::sum_squares(d.narrow(2, Lq, Lk - Lq)).item() == 0.0);
        CHECK(k::sum_squares(d.narrow(0, 0, 1).narrow(2, 2, 1)).item() == 0.0);
        CHECK(k::sum_squares(d.narrow(2, 0, Lq)).item() > 0.0);
      }
    }
  }
}

TEST_CASE("attention layers: fused path on == off for every encoding it serves (values, gradients, monitors)") {
  for (const char* type : {"none", "t5", "alibi", "rope", "kerple_log", "sandwich", "xpos", "dynamic_bias", "shaw"}) {
    for (bool causal : {true, false}) {
      if (std::string(type) == "xpos" && !causal) continue;  // causal-only
      INFO(type << (causal ? " causal" : " bidirectional"));
      const nn::PositionConfig pc = layer_position(type);
      nn::AttentionConfig ac;
      ac.d_model = 16;
      ac.n_heads = 4;
      ac.bias_scale.enabled = true;  // alpha on the bias too
      ac.bias_scale.init = 0.8;
      auto on = layer_outputs(true, pc, ac, causal, Tensor(), Tensor(), false);
      auto off = layer_outputs(false, pc, ac, causal, Tensor(), Tensor(), false);
      nn::set_fused_attention(true);
      require_same_outputs(on, off);
    }
  }
}

// The monitors from the kernel (row_stats) against a plain float64 loop over the full score
// matrix: max |S| over visible cells, -sum P log P per row, 0 for rows with no visible key.
TEST_CASE("fused attention row statistics: max |logit| and entropy per row, hidden rows 0") {
  struct StatCase {
    int64_t B, H, Lq, Lk, dh;
    bool causal, bias, padding;
    int64_t q_off, k_off;
  };
  const StatCase cases[] = {{2, 3, 70, 70, 4, true, true, false, 0, 0},
                            {1, 2, 5, 9, 3, false, true, true, 0, 0},
                            {1, 2, 6, 6, 4, true, false, false, 0, 3},  // rows 0..2 see no key
                            {2, 1, 3, 8, 2, true, true, true, 5, 0},
                            {1, 2, 300, 560, 3, true, true, true, 260, 0}};  // three key tiles
  uint64_t seed = 100;
  for (const StatCase& c : cases) {
    INFO("B " << c.B << " Lq " << c.Lq << " Lk " << c.Lk << " causal " << c.causal << " k_off " << c.k_off);
    Generator g(seed++);
    Tensor q = Tensor::randn({c.B, c.H, c.Lq, c.dh}, g, DType::F64), kk = Tensor::randn({c.B, c.H, c.Lk, c.dh}, g, DType::F64),
           v = Tensor::randn({c.B, c.H, c.Lk, c.dh}, g, DType::F64);
    Tensor t = c.bias ? k::unary(k::Unary::MulScalar, Tensor::randn({c.H, c.Lq + c.Lk - 1}, g, DType::F64), 3.0)
                       : Tensor();
    std::vector<double> pad(size_t(c.B * c.Lk), 0.0);
    if (c.padding)
      for (int64_t b = 0; b < c.B; ++b) pad[size_t(b * c.Lk + b)] = 1.0;
    Tensor kp = c.padding ? Tensor::from_vector(pad, {c.B, c.Lk}) : Tensor();
    const double scale = 0.9;
    k::AttentionArgs a{scale, c.causal, c.q_off, c.k_off, /*row_stats=*/true};
    auto out = k::attention(q, kk, v, t, kp, a);
    REQUIRE(out.max_abs.defined());
    REQUIRE(out.entropy.defined());
    const auto Q = q.to_vector<double>(), K = kk.to_vector<double>();
    const auto T = c.bias ? t.to_vector<double>() : std::vector<double>{};
    const auto mx = out.max_abs.to_vector<double>(), en = out.entropy.to_vector<double>();
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.H; ++h)
        for (int64_t i = 0; i < c.Lq; ++i) {
          std::vector<double> srow;
          double want_max = 0;
          for (int64_t j = 0; j < c.Lk; ++j) {
            if (c.causal && c.k_off + j > c.q_off + i) continue;
            if (pad[size_t(b * c.Lk + j)] != 0.0) continue;
            double sij = 0;
            for (int64_t e = 0; e < c.dh; ++e)
              sij += Q[size_t(((b * c.H + h) * c.Lq + i) * c.dh + e)] * K[size_t(((b * c.H + h) * c.Lk + j) * c.dh + e)];
            sij *= scale;
            if (c.bias) sij += T[size_t(h * (c.Lq + c.Lk - 1) + j - i + c.Lq - 1)];
            srow.push_back(sij);
            want_max = std::max(want_max, std::abs(sij));
          }
          double want_ent = 0;
          if (!srow.empty()) {
            const double m = *std::max_element(srow.begin(), srow.end());
            double z = 0;
            for (double x : srow) z += std::exp(x - m);
            for (double x : srow) {
              const double p = std::exp(x - m) / z;
              if (p > 0) want_ent -= p * std::log(p);
            }
          }
          const size_t r = size_t((b * c.H + h) * c.Lq + i);
          INFO("b " << b << " h " << h << " row " << i);
          CHECK(mx[r] == Approx(want_max).epsilon(1e-12).margin(1e-12));
          CHECK(en[r] == Approx(want_ent).epsilon(1e-10).margin(1e-12));
        }
  }
  // float32 entropy stays accurate for peaked rows (computed relative to the row max)
  Generator g(9);
  Tensor q = k::unary(k::Unary::MulScalar, Tensor::randn({1, 1, 4, 8}, g), 6.0),
         kk = k::unary(k::Unary::MulScalar, Tensor::randn({1, 1, 4, 8}, g), 6.0), v = Tensor::randn({1, 1, 4, 8}, g);
  k::AttentionArgs a{1.0, false, 0, 0, true};
  auto o32 = k::attention(q, kk, v, Tensor(), Tensor(), a);
  auto o64 = k::attention(q.to(DType::F64), kk.to(DType::F64), v.to(DType::F64), Tensor(), Tensor(), a);
  CHECK(test::allclose(o32.entropy.to(DType::F64), o64.entropy, 1e-4, 1e-5));
  CHECK(test::allclose(o32.max_abs.to(DType::F64), o64.max_abs, 1e-5, 1e-5));
}

// Bucketed content terms (Shaw's relative keys and values) inside the kernel against the
// materialised ops: S = scale (q k^T + gather(q R_k^T, idx)) + bias, O = P v + scatter(P, idx) R_v.
namespace {

// idx[i, j] = clamp(kj - qi, -K, K) + K as [Lq, Lk], and the Toeplitz bucket [Lq + Lk - 1].
std::pair<Tensor, Tensor> shaw_index(int64_t Lq, int64_t Lk, int64_t q_off, int64_t k_off, int64_t K) {
  std::vector<int64_t> idx(size_t(Lq * Lk)), bucket(size_t(Lq + Lk - 1));
  for (int64_t i = 0; i < Lq; ++i)
    for (int64_t j = 0; j < Lk; ++j) idx[size_t(i * Lk + j)] = std::clamp((k_off + j) - (q_off + i), -K, K) + K;
  for (int64_t t = 0; t < Lq + Lk - 1; ++t) bucket[size_t(t)] = std::clamp((k_off - q_off) + t - (Lq - 1), -K, K) + K;
  return {Tensor::from_vector(idx, {Lq, Lk}), Tensor::from_vector(bucket, {Lq + Lk - 1})};
}

}  // namespace

TEST_CASE("fused attention with bucketed terms equals gather/scatter ops, values and all six gradients") {
  struct BCase {
    int64_t B, H, Lq, Lk, dh, K;
    bool causal, bias, padding;
    int64_t q_off, k_off;
  };
  const BCase cases[] = {{2, 2, 9, 9, 4, 3, true, false, false, 0, 0},   {1, 3, 70, 70, 3, 5, true, true, false, 0, 0},
                         {2, 2, 6, 11, 4, 2, false, true, true, 0, 0},   {1, 2, 1, 8, 4, 3, true, false, false, 7, 0},
                         {2, 1, 4, 10, 2, 20, false, false, false, 3, 0},   // K beyond every distance
                         {1, 2, 300, 540, 3, 6, true, true, true, 240, 0}};  // three key tiles
  uint64_t seed = 300;
  for (const BCase& c : cases) {
    INFO("B " << c.B << " Lq " << c.Lq << " Lk " << c.Lk << " K " << c.K << " causal " << c.causal << " q_off "
              << c.q_off);
    const int64_t NB = 2 * c.K + 1;
    Variable q = rand_var({c.B, c.H, c.Lq, c.dh}, seed++), k = rand_var({c.B, c.H, c.Lk, c.dh}, seed++),
             v = rand_var({c.B, c.H, c.Lk, c.dh}, seed++), rk = rand_var({NB, c.dh}, seed++),
             rv = rand_var({NB, c.dh}, seed++);
    Variable bias = c.bias ? rand_var({c.H, c.Lq + c.Lk - 1}, seed++) : Variable();
    Tensor kp;
    if (c.padding) {
      std::vector<int64_t> pad(size_t(c.B * c.Lk), 0);
      for (int64_t b = 0; b < c.B; ++b) pad[size_t(b * c.Lk + b)] = 1;
      kp = Tensor::from_vector(pad, {c.B, c.Lk});
    }
    const std::pair<Tensor, Tensor> index = shaw_index(c.Lq, c.Lk, c.q_off, c.k_off, c.K);  // (no structured
    const Tensor idx = index.first.expand({c.B, c.H, c.Lq, c.Lk}), bucket = index.second;   // bindings: clang-14)
    const k::AttentionArgs a{0.6, c.causal, c.q_off, c.k_off};
    auto fused = [&]() {
      Variable ow = fused_attention_buckets(q, k, v, bias, matmul(q, transpose(rk, 0, 1)), bucket, kp, a);
      return narrow(ow, 3, 0, c.dh) + matmul(narrow(ow, 3, c.dh, NB), rv);
    };
    auto reference_ops = [&]() {
      constexpr double kNegInf = -std::numeric_limits<double>::infinity();
      Variable s = (matmul(q, transpose(k, -1, -2)) + gather(matmul(q, transpose(rk, 0, 1)), -1, idx)) * a.scale;
      if (bias.defined()) s = add_toeplitz_bias(s, bias);
      if (kp.defined()) s = masked_fill(s, kp.to(DType::F64).view({c.B, 1, 1, c.Lk}), kNegInf);
      if (a.causal) s = causal_fill(s, a.q_offset, a.k_offset, kNegInf);
      Variable p = softmax(s, -1);
      Shape ws = p.shape();
      ws.back() = NB;
      return matmul(p, v) + matmul(scatter_add(ws, -1, idx, p), rv);
    };
    Variable fo = fused(), ro = reference_ops();
    REQUIRE(test::allclose(fo.data(), ro.data(), 1e-12, 1e-13));
    std::vector<Variable*> inputs{&q, &k, &v, &rk, &rv};  // (q, k, v, R_k, R_v, bias)
    if (c.bias) inputs.push_back(&bias);
    require_same_gradients(fo, ro, inputs, seed++);
  }
}

TEST_CASE("fused attention with bucketed terms: float64 gradcheck of q, k, v, bias and qr, bad buckets are named") {
  Variable q = rand_var({1, 2, 5, 3}, 41), k = rand_var({1, 2, 6, 3}, 42), v = rand_var({1, 2, 6, 3}, 43);
  Variable bias = rand_var({2, 10}, 44), qr = rand_var({1, 2, 5, 5}, 45);
  const Tensor bucket = shaw_index(5, 6, 1, 0, 2).second;
  for (bool causal : {true, false})
    test::require_gradcheck("fused_attention_buckets", [&](const std::vector<Variable>& in) {
      return fused_attention_buckets(in[0], in[1], in[2], in[3], in[4], bucket, Tensor(),
                                     k::AttentionArgs{0.5, causal, 1, 0});
    }, {q, k, v, bias, qr});
  const Tensor bad = Tensor::from_vector(std::vector<int64_t>(10, 5), {10});  // NB = 5: 5 is out of range
  CHECK_THROWS_WITH(k::attention(q.data(), k.data(), v.data(), Tensor(), Tensor(), k::AttentionArgs{0.5},
                                 k::AttentionBuckets{qr.data(), bad}),
                    Catch::Contains("bucket[0] = 5 is outside [0, 5)"));
  CHECK_THROWS_WITH(k::attention(q.data(), k.data(), v.data(), Tensor(), Tensor(), k::AttentionArgs{0.5},
                                 k::AttentionBuckets{qr.data(), bucket.narrow(0, 0, 9)}),
                    Catch::Contains("bucket must be int64 [Lq + Lk - 1] = [10]"));
}

// Attention dropout drawn inside the kernel: the same cells as `dropout` drops on the
// materialised P (counter-based draws), values and every gradient equal.
TEST_CASE("fused attention dropout drops the cells dropout() drops on the materialised P") {
  const Case cases[] = {{2, 3, 9, 9, 4, true, true, false, 0, 0}, {2, 2, 70, 70, 3, true, false, false, 0, 0},
                        {1, 2, 6, 11, 4, false, true, true, 0, 0}, {1, 2, 1, 8, 4, true, true, false, 7, 0},
                        {1, 1, 300, 520, 3, false, true, true, 0, 0}};  // three key tiles
  uint64_t seed = 500;
  for (const Case& c : cases) {
    for (double p : {0.3, 0.0}) {
      INFO("B " << c.B << " Lq " << c.Lq << " Lk " << c.Lk << " causal " << c.causal << " p " << p);
      Variable q = rand_var({c.B, c.H, c.Lq, c.dh}, seed++), k = rand_var({c.B, c.H, c.Lk, c.dh}, seed++),
               v = rand_var({c.B, c.H, c.Lk, c.dh}, seed++);
      Variable bias = c.bias ? rand_var({c.H, c.Lq + c.Lk - 1}, seed++) : Variable();
      Tensor kp;
      if (c.padding) kp = Tensor::from_vector(std::vector<int64_t>(size_t(c.B * c.Lk), 0), {c.B, c.Lk});
      const uint64_t dseed = 77 + seed;
      k::AttentionArgs a{0.7, c.causal, c.q_off, c.k_off};
      a.dropout_p = p;
      a.dropout_seed = dseed;
      a.dropout_first = 0;  // a fresh Generator(dseed) hands out its first draws
      Variable fo = fused_attention(q, k, v, bias, kp, a);
      constexpr double kNegInf = -std::numeric_limits<double>::infinity();
      Variable s = matmul(q, transpose(k, -1, -2)) * a.scale;
      if (bias.defined()) s = add_toeplitz_bias(s, bias);
      if (c.causal) s = causal_fill(s, a.q_offset, a.k_offset, kNegInf);
      Generator gen(dseed);
      Variable ro = matmul(dropout(softmax(s, -1), p, true, gen), v);
      REQUIRE(test::allclose(fo.data(), ro.data(), 1e-12, 1e-13));
      if (p > 0) CHECK(gen.state().offset == uint64_t(c.B * c.H * c.Lq * c.Lk));  // the draws the kernel used
      std::vector<Variable*> inputs{&q, &k, &v};
      if (c.bias) inputs.push_back(&bias);
      require_same_gradients(fo, ro, inputs, seed++);
    }
  }
}

TEST_CASE("attention layers with dropout: fused path on == off in training (t5, rope, shaw), eval unaffected") {
  for (const char* type : {"t5", "rope", "shaw"}) {
    INFO(type);
    const nn::PositionConfig pc = layer_position(type);
    nn::AttentionConfig ac;
    ac.d_model = 16;
    ac.n_heads = 4;
    ac.dropout = 0.25;
    auto run = [&](bool fused, bool training) {
      nn::set_fused_attention(fused);
      Generator g(3);
      auto pos = nn::make_position_encoding(pc, g);
      nn::MultiHeadAttention attn(ac, pos, true, g, DType::F64);
      attn.train(training);
      Variable x = rand_var({2, 11, 16}, 4);
      Generator drop(99);
      Variable y = attn.forward({.xq = x, .xkv = x, .causal = true}, {.gen = &drop});
      y.backward(Tensor::ones(y.shape(), DType::F64));
      std::vector<Tensor> out{y.data(), x.grad(), Tensor::scalar(double(drop.state().offset), DType::F64)};
      for (auto& [n, p] : attn.named_parameters())
        if (p.grad().defined()) out.push_back(p.grad());
      return out;
    };
    for (bool training : {true, false}) {
      INFO((training ? "training" : "eval"));
      auto on = run(true, training), off = run(false, training);
      nn::set_fused_attention(true);
      REQUIRE(on.size() == off.size());
      for (size_t i = 0; i < on.size(); ++i) {
        INFO("tensor " << i);
        CHECK(test::allclose(on[i], off[i], 1e-10, 1e-12));
      }
    }
  }
}

TEST_CASE("fused attention flushes keys weighing < e^-44 of the row's largest (float32, no subnormal GEMM inputs)") {
  // One query, three keys: scores 0, -10 and -50 (biases). The third key's weight e^-50 is
  // flushed: with a huge value vector it would otherwise move the output by e^-50 * 1e30.
  Tensor q = Tensor::zeros({1, 1, 1, 2}), kk = Tensor::zeros({1, 1, 3, 2});
  Tensor v = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 1e30f, 1e30f}, {1, 1, 3, 2});
  Tensor t = Tensor::from_vector(std::vector<float>{0, -10, -50}, {1, 3});  // key j: T[j - i + Lq - 1], i = 0
  auto o = k::attention(q, kk, v, t, Tensor(), k::AttentionArgs{1.0, false, 0, 0});
  const double w1 = std::exp(-10.0) / (1 + std::exp(-10.0));  // the second key's weight
  const std::vector<float> got = o.o.to_vector<float>();
  CHECK(got[0] == Approx(1 * (1 - w1) + 3 * w1).epsilon(1e-6));
  CHECK(got[1] == Approx(2 * (1 - w1) + 4 * w1).epsilon(1e-6));
  // float64 keeps it (flushed only below e^-700)
  auto o64 = k::attention(q.to(DType::F64), kk.to(DType::F64), v.to(DType::F64), t.to(DType::F64), Tensor(),
                          k::AttentionArgs{1.0, false, 0, 0});
  CHECK(o64.o.to_vector<double>()[0] > 1e8);
}

// Index-driven bias (Swin 2D relative bias, Graphormer spatial encoding) inside the kernel:
// S += table[index[(b,) i, j], h], against the gathered bias as ops (embedding + permute).
namespace {

// A deterministic int64 index [Lq, Lk] (batched: [B, Lq, Lk]) with values in [0, nt) that is
// neither Toeplitz nor constant along rows.
Tensor make_index(int64_t B, int64_t Lq, int64_t Lk, int64_t nt, bool batched) {
  const int64_t nb = batched ? B : 1;
  std::vector<int64_t> idx(static_cast<size_t>(nb * Lq * Lk));
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < Lq; ++i)
      for (int64_t j = 0; j < Lk; ++j) idx[size_t((b * Lq + i) * Lk + j)] = (i * 7 + j * j * 3 + b * 5 + i * j) % nt;
  return batched ? Tensor::from_vector(idx, {B, Lq, Lk}) : Tensor::from_vector(idx, {Lq, Lk});
}

// The materialised reference with an index bias: the gathered [(B,) H, Lq, Lk] bias added
// with the Toeplitz one, before the masks.
Variable reference_indexed(const Variable& q, const Variable& k, const Variable& v, const Variable& bias,
                           const Variable& table, const Tensor& index, const Tensor& kp, const k::AttentionArgs& a) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  Variable s = matmul(q, transpose(k, -1, -2)) * a.scale;
  if (bias.defined()) s = add_toeplitz_bias(s, bias);
  Variable g = embedding(table, index);  // [(B,) Lq, Lk, H]
  s = s + (index.dim() == 2 ? permute(g, {2, 0, 1}) : permute(g, {0, 3, 1, 2}));
  if (kp.defined()) s = masked_fill(s, kp.to(q.dtype()).view({q.size(0), 1, 1, k.size(2)}), kNegInf);
  if (a.causal) s = causal_fill(s, a.q_offset, a.k_offset, kNegInf);
  return matmul(softmax(s, -1), v);
}

}  // namespace

TEST_CASE("fused attention with an index bias equals the gathered bias as ops, values and all gradients") {
  struct ICase {
    int64_t B, H, Lq, Lk, dh, NT;
    bool batched, causal, bias, padding;
    int64_t q_off, k_off;
  };
  const ICase cases[] = {
      {2, 3, 5, 5, 4, 7, false, false, false, false, 0, 0},  {2, 2, 6, 6, 3, 9, true, false, true, true, 0, 0},
      {2, 2, 9, 4, 4, 5, true, true, false, false, 5, 0},    {1, 2, 70, 70, 3, 13, false, false, true, true, 0, 0},
      {2, 1, 3, 11, 2, 1, true, false, false, true, 0, 0},   // a one-row table
      // more than one key tile (256 keys) and more than one row block
      {1, 2, 300, 600, 3, 31, false, false, true, true, 0, 0}, {2, 1, 70, 530, 4, 17, true, false, false, true, 0, 0},
      {1, 2, 280, 280, 3, 11, true, true, true, false, 0, 0},
  };
  uint64_t seed = 700;
  for (const ICase& c : cases) {
    INFO("B " << c.B << " H " << c.H << " Lq " << c.Lq << " Lk " << c.Lk << " NT " << c.NT << " batched "
              << c.batched << " causal " << c.causal << " bias " << c.bias << " padding " << c.padding);
    Variable q = rand_var({c.B, c.H, c.Lq, c.dh}, seed++), k = rand_var({c.B, c.H, c.Lk, c.dh}, seed++),
             v = rand_var({c.B, c.H, c.Lk, c.dh}, seed++), table = rand_var({c.NT, c.H}, seed++, -2, 2);
    Variable bias = c.bias ? rand_var({c.H, c.Lq + c.Lk - 1}, seed++) : Variable();
    const Tensor index = make_index(c.B, c.Lq, c.Lk, c.NT, c.batched);
    Tensor kp;
    if (c.padding) {
      std::vector<int64_t> pad(size_t(c.B * c.Lk), 0);
      for (int64_t b = 0; b < c.B; ++b) pad[size_t(b * c.Lk + c.Lk - 1 - b)] = 1;
      kp = Tensor::from_vector(pad, {c.B, c.Lk});
    }
    const k::AttentionArgs a{0.6, c.causal, c.q_off, c.k_off};
    Variable fo = fused_attention_indexed(q, k, v, bias, table, index, kp, a),
             ro = reference_indexed(q, k, v, bias, table, index, kp, a);
    REQUIRE(test::allclose(fo.data(), ro.data(), 1e-12, 1e-13));
    std::vector<Variable*> inputs{&q, &k, &v, &table};
    if (c.bias) inputs.push_back(&bias);
    require_same_gradients(fo, ro, inputs, seed++);
  }
}

TEST_CASE("fused attention with an index bias: float64 gradcheck of q, k, v, bias and table, bad index is named") {
  Variable q = rand_var({2, 2, 5, 3}, 61), k = rand_var({2, 2, 6, 3}, 62), v = rand_var({2, 2, 6, 3}, 63);
  Variable bias = rand_var({2, 10}, 64), table = rand_var({4, 2}, 65, -2, 2);
  for (bool batched : {false, true})
    for (bool causal : {true, false}) {
      INFO("batched " << batched << " causal " << causal);
      const Tensor index = make_index(2, 5, 6, 4, batched);
      test::require_gradcheck("fused_attention_indexed", [&](const std::vector<Variable>& in) {
        return fused_attention_indexed(in[0], in[1], in[2], in[3], in[4], index, Tensor(),
                                       k::AttentionArgs{0.5, causal, 1, 0});
      }, {q, k, v, bias, table});
    }
  const k::AttentionArgs a{0.5};
  auto call = [&](const Tensor& tab, const Tensor& idx) {
    return k::attention(q.data(), k.data(), v.data(), Tensor(), Tensor(), a, {}, k::AttentionIndexBias{tab, idx});
  };
  std::vector<int64_t> bad(2 * 5 * 6, 1);
  bad[size_t((1 * 5 + 2) * 6 + 3)] = 4;  // NT = 4: row 4 does not exist
  CHECK_THROWS_WITH(call(table.data(), Tensor::from_vector(bad, {2, 5, 6})),
                    Catch::Contains("attention: index-bias index[1, 2, 3] = 4 is outside the table rows [0, 4)"));
  std::vector<int64_t> neg(5 * 6, 0);
  neg[7] = -1;
  CHECK_THROWS_WITH(call(table.data(), Tensor::from_vector(neg, {5, 6})),
                    Catch::Contains("index[1, 1] = -1 is outside the table rows [0, 4)"));
  CHECK_THROWS_WITH(call(table.data(), make_index(2, 6, 5, 4, false)),
                    Catch::Contains("index-bias index must be int64 [Lq, Lk] = [5, 6] or [B, Lq, Lk] = [2, 5, 6]"));
  CHECK_THROWS_WITH(call(table.data(), make_index(3, 5, 6, 4, true)), Catch::Contains("[B, Lq, Lk] = [2, 5, 6]"));
  CHECK_THROWS_WITH(call(table.data(), make_index(2, 5, 6, 4, false).to(DType::F64)),
                    Catch::Contains("index-bias index must be int64"));
  CHECK_THROWS_WITH(call(Tensor::zeros({4, 3}, DType::F64), make_index(2, 5, 6, 4, false)),
                    Catch::Contains("index-bias table must be [NT, H] = [NT, 2], got [4, 3]"));
  CHECK_THROWS_WITH(call(table.data(), Tensor()), Catch::Contains("index bias needs both table and index"));
  // the backward checks the same
  const k::AttentionIndexBias good{table.data(), make_index(2, 5, 6, 4, false)};
  auto fwd = k::attention(q.data(), k.data(), v.data(), Tensor(), Tensor(), a, {}, good);
  CHECK_THROWS_WITH(k::attention_backward(fwd.o, q.data(), k.data(), v.data(), Tensor(), Tensor(), fwd, a, {},
                                          Tensor(), k::AttentionIndexBias{table.data(), Tensor::from_vector(bad, {2, 5, 6})}),
                    Catch::Contains("attention_backward: index-bias index[1, 2, 3] = 4 is outside"));
}

TEST_CASE("fused attention backward with an index bias is the same at 1 and 2 threads (deterministic dtable)") {
  Generator g(18);
  Tensor q = Tensor::randn({3, 2, 100, 8}, g), kk = Tensor::randn({3, 2, 300, 8}, g),
         v = Tensor::randn({3, 2, 300, 8}, g), tab = Tensor::randn({23, 2}, g), go = Tensor::randn({3, 2, 100, 8}, g);
  k::AttentionArgs a{0.35, false, 0, 0};
  for (bool batched : {false, true}) {
    INFO("batched " << batched);
    const k::AttentionIndexBias ib{tab, make_index(3, 100, 300, 23, batched)};
    const int before = k::num_threads();
    k::set_num_threads(1);
    auto f1 = k::attention(q, kk, v, Tensor(), Tensor(), a, {}, ib);
    auto b1 = k::attention_backward(go, q, kk, v, Tensor(), Tensor(), f1, a, {}, Tensor(), ib);
    k::set_num_threads(2);
    auto f2 = k::attention(q, kk, v, Tensor(), Tensor(), a, {}, ib);
    auto b2 = k::attention_backward(go, q, kk, v, Tensor(), Tensor(), f2, a, {}, Tensor(), ib);
    k::set_num_threads(before);
    REQUIRE(b1.dtable.defined());
    CHECK(b1.dtable.shape() == Shape{23, 2});
    CHECK(f1.o.to_vector<float>() == f2.o.to_vector<float>());
    CHECK(b1.dtable.to_vector<float>() == b2.dtable.to_vector<float>());
    CHECK(b1.dq.to_vector<float>() == b2.dq.to_vector<float>());
  }
}

TEST_CASE("attention layers: fused path on == off for the index-bias encodings (relative_2d, graph_spd)") {
  // graph_spd: distances of two small graphs (a path and a star, an isolated node, padding nodes)
  using Adj = std::vector<std::vector<int64_t>>;
  const Adj path = {{1}, {0, 2}, {1, 3}, {2, 4}, {3}, {6}, {5}, {}, {8}, {7}};
  const Adj star = {{1, 2, 3, 4}, {0}, {0}, {0}, {0, 5}, {4}, {7}, {6}};
  const Tensor spd = nn::shortest_path_distances({path, star}, 11);  // [2, 11, 11]
  std::vector<int64_t> grid_index(11 * 11);                          // relative_2d with its own index
  for (int64_t i = 0; i < 11; ++i)
    for (int64_t j = 0; j < 11; ++j) grid_index[size_t(i * 11 + j)] = (i * 3 + j * 5) % 35;
  struct LCase {
    const char* type;
    std::map<std::string, std::string> params;
    Tensor index;
    bool padding;
  };
  const LCase cases[] = {
      {"relative_2d", {{"grid_h", "3"}, {"grid_w", "4"}}, Tensor(), false},
      {"relative_2d", {{"grid_h", "3"}, {"grid_w", "4"}}, Tensor(), true},
      {"relative_2d", {{"grid_h", "4"}, {"grid_w", "3"}}, Tensor::from_vector(grid_index, {11, 11}), false},
      {"graph_spd", {{"max_dist", "2"}}, spd, true},
      {"graph_spd", {}, spd.select(0, 1).contiguous(), false},  // a shared [L, L] index
  };
  for (const LCase& c : cases)
    for (bool per_head : {true, false}) {
      INFO(c.type << " index " << (c.index.defined() ? shape_str(c.index.shape()) : "computed") << " padding "
                  << c.padding << " per-head alpha " << per_head);
      nn::PositionConfig pc = layer_position(c.type);
      pc.params = nn::PositionParams(c.params);
      nn::AttentionConfig ac;
      ac.d_model = 16;
      ac.n_heads = 4;
      ac.bias_scale.enabled = true;  // alpha on the table too (its own gradient)
      ac.bias_scale.per_head = per_head;
      ac.bias_scale.learnable = true;
      ac.bias_scale.init = 0.8;
      Tensor kp;
      if (c.padding) {
        kp = Tensor::zeros({2, 11}, DType::F64);
        kp.select(0, 1).narrow(0, 8, 3).fill_(1.0);
      }
      auto run = [&](bool fused) {
        bool formed_probs = false;
        std::vector<Tensor> out = layer_outputs(fused, pc, ac, false, kp, c.index, true, &formed_probs);
        CHECK(formed_probs == !fused);  // the fused path never forms P
        return out;
      };
      auto on = run(true), off = run(false);
      nn::set_fused_attention(true);
      require_same_outputs(on, off);
    }
}

TEST_CASE("fused attention under autocast rounds q, k, v, dO, o and dq, dk, dv itself: the bits of rounding the "
          "tensors around the kernel",
          "[precision]") {
  // The kernel's own rounding (k::AttentionArgs::inputs / round_output) against the composition
  // it replaces: round q, k, v and dO as tensors, run the float32 kernel, round o, dq, dk, dv.
  // The backward's D_i = dO_i . O_i takes the rounded o in both. Both round P and dS before their
  // products (probs; the next test checks where). Heads as views of [B, L, H, dh] (the
  // projections' layout), odd sizes (odd tile widths at the causal edge), a T5-style bias and the
  // causal mask. With bf16 on a CPU with AVX512-BF16 the kernel runs its products on bf16 pairs
  // (kernels/cpu/tile_gemm.h: S = Q K^T and dO V^T for an even dh, the four products with P and
  // dS for any dh) while the reference (float32 tensors, probs only) runs the float32 tiles: the
  // same bits.
  // Every tile ISA this CPU runs: the process picks one, the pairs must hold wherever the CPU has
  // them. AMX (amxbf16) sums each product's terms in its own order (kernels/cpu/tile_gemm.h): its
  // bf16 results within one bf16 rounding of the float32 tiles', lse and the bias gradient within
  // float32 noise.
  using k::cpu::TileIsa;
  auto near = [](const Tensor& got, const Tensor& ref, double rel, double abs_of_max) {
    const std::vector<float> a = got.to_vector<float>(), b = ref.to_vector<float>();
    REQUIRE(a.size() == b.size());
    double mx = 0;
    for (float x : b) mx = std::max(mx, double(std::abs(x)));
    int64_t far = 0;
    for (size_t i = 0; i < a.size(); ++i)
      far += !(std::abs(double(a[i]) - b[i]) <= rel * std::abs(double(b[i])) + abs_of_max * mx);
    return far;
  };
  for (TileIsa isa : {TileIsa::AmxBf16, TileIsa::Avx512Bf16, TileIsa::Avx512, TileIsa::Avx2})
    for (auto [in, round] :
         {std::pair{k::GemmInputs::BF16, k::Unary::RoundBF16}, std::pair{k::GemmInputs::FP16, k::Unary::RoundFP16}})
      for (const int64_t dh : {16, 15}) {
        if (!k::cpu::tile_isa_supported(isa)) continue;
        struct Forced {  // the process's choice back however the body ends
          explicit Forced(TileIsa i) { k::cpu::set_tile_isa(i); }
          ~Forced() { k::cpu::set_tile_isa(std::nullopt); }
        } forced(isa);
        INFO((in == k::GemmInputs::BF16 ? "bf16" : "fp16")
             << " dh=" << dh << " tiles: " << k::cpu_attention_tile_path());
        Generator g(21);
        const int64_t B = 2, H = 3, L = 77;
        auto heads = [&] { return Tensor::randn({B, L, H, dh}, g).permute({0, 2, 1, 3}); };
        const Tensor q = heads(), kk = heads(), v = heads(), go = heads(), t = Tensor::randn({H, 2 * L - 1}, g);
        k::AttentionArgs plain{0.25, true, 0, 0};
        plain.probs = in;
        k::AttentionArgs fused = plain;
        fused.inputs = in;
        fused.round_output = true;
        const k::Unary rop = round;  // (clang 14 cannot capture a structured binding)
        auto r = [rop](const Tensor& x) { return k::unary(rop, x); };
        k::AttentionOut ref = k::attention(r(q), r(kk), r(v), t, Tensor(), plain);
        ref.o = r(ref.o);
        const k::AttentionGrads ref_g = k::attention_backward(r(go), r(q), r(kk), r(v), t, Tensor(), ref, plain);
        const k::AttentionOut got = k::attention(q, kk, v, t, Tensor(), fused);
        const k::AttentionGrads got_g = k::attention_backward(go, q, kk, v, t, Tensor(), got, fused);
        if (isa == TileIsa::AmxBf16 && in == k::GemmInputs::BF16) {
          CHECK(near(got.o, ref.o, 0x1p-7, 1e-6) == 0);
          CHECK(near(got.lse, ref.lse, 1e-5, 1e-6) == 0);
          CHECK(near(got_g.dq, r(ref_g.dq), 0x1p-7, 1e-5) == 0);
          CHECK(near(got_g.dk, r(ref_g.dk), 0x1p-7, 1e-5) == 0);
          CHECK(near(got_g.dv, r(ref_g.dv), 0x1p-7, 1e-5) == 0);
          CHECK(near(got_g.dbias, ref_g.dbias, 1e-4, 1e-4) == 0);
          CHECK(k::cpu_attention_tile_path().find("AMX tiles") != std::string::npos);
          continue;
        }
        CHECK(got.o.to_vector<float>() == ref.o.to_vector<float>());
        CHECK(got.lse.to_vector<float>() == ref.lse.to_vector<float>());
        CHECK(got_g.dq.to_vector<float>() == r(ref_g.dq).to_vector<float>());
        CHECK(got_g.dk.to_vector<float>() == r(ref_g.dk).to_vector<float>());
        CHECK(got_g.dv.to_vector<float>() == r(ref_g.dv).to_vector<float>());
        CHECK(got_g.dbias.to_vector<float>() == ref_g.dbias.to_vector<float>());  // the bias stays float32
        // and the rounding did happen: not the float32 kernel's values
        k::AttentionArgs f32 = plain;
        f32.probs = k::GemmInputs::F32;
        CHECK(got.o.to_vector<float>() != k::attention(q, kk, v, t, Tensor(), f32).o.to_vector<float>());
      }
}

TEST_CASE("fused attention with 16-bit probabilities multiplies P and dS rounded, sums them unrounded", "[precision]") {
  // One head, two query rows, two keys, dh 2, worked out by hand (k::AttentionArgs::probs; q, k,
  // v and dO stay float32 here, so no other rounding hides these). Row 1 scores S = [0, -1]:
  // E = [1, e^-1], l = 1 + e^-1, and with v = [(0, 0), (1, 0)]:
  //   o[1] = bf16(e^-1) / l  (FlashAttention's 16-bit P times V; the sum l is float32).
  // Backward with dO = [(0, 0), (1, 0)]: P[1] = E / l, D_1 = o[1], dS[1] = P[1] ([0, 1] - o[1]),
  // row 0's dS = 0:
  //   dv[1] = bf16(P11);  dq[1] = -bf16(dS11) (keys (0, 0), (-1, 0));  dk[j] = bf16(dS1j) (q[1] = (1, 0));
  //   the bias gradient on diagonal 1 is dS00 + dS11 = dS11 unrounded.
  const Tensor q = Tensor::from_vector(std::vector<float>{0, 0, 1, 0}, {1, 1, 2, 2});
  const Tensor kk = Tensor::from_vector(std::vector<float>{0, 0, -1, 0}, {1, 1, 2, 2});
  const Tensor v = Tensor::from_vector(std::vector<float>{0, 0, 1, 0}, {1, 1, 2, 2});
  const Tensor go = Tensor::from_vector(std::vector<float>{0, 0, 1, 0}, {1, 1, 2, 2});
  const Tensor t = Tensor::zeros({1, 3}, DType::F32);
  const double e = std::exp(-1.0), l = 1.0 + e, p11 = e / l;
  const double o1 = double(round_to_bf16(float(e))) / l;
  const double ds11 = p11 * (1.0 - o1), ds10 = (1.0 / l) * (0.0 - o1);
  for (const bool pairs_inputs : {false, true}) {
    // pairs_inputs: q, k, v, dO hold bf16 values and inputs = BF16 too, so that on AVX512-BF16
    // the products run on bf16 pairs (dq, dk, dv are then rounded as written: expected values
    // are bf16 values already, except o's, which is left unrounded here)
    INFO((pairs_inputs ? "inputs bf16" : "inputs f32") << ", tiles: " << k::cpu_attention_tile_path());
    k::AttentionArgs a{1.0, false, 0, 0};
    a.probs = k::GemmInputs::BF16;
    if (pairs_inputs) a.inputs = k::GemmInputs::BF16;
    const k::AttentionOut f = k::attention(q, kk, v, t, Tensor(), a);
    const k::AttentionGrads g = k::attention_backward(go, q, kk, v, t, Tensor(), f, a);
    const auto o = f.o.to_vector<float>(), dq = g.dq.to_vector<float>(), dk = g.dk.to_vector<float>(),
               dv = g.dv.to_vector<float>(), db = g.dbias.to_vector<float>();
    CHECK(o[2] == Approx(o1).epsilon(1e-6));
    CHECK(std::abs(o[2] - e / l) > 1e-4);  // not the float32 product
    CHECK(o[0] == 0.5f);                   // row 0: P = [1/2, 1/2], exact in bf16
    CHECK(dv[2] == round_to_bf16(float(p11)));
    CHECK(std::abs(dv[2] - p11) > 1e-4);
    CHECK(dq[2] == -round_to_bf16(float(ds11)));
    CHECK(dk[2] == round_to_bf16(float(ds11)));
    CHECK(std::abs(dk[2] - ds11) > 1e-4);
    CHECK(db[1] == Approx(ds11).epsilon(1e-6));  // the bias gradient takes dS unrounded
    CHECK(dk[0] == round_to_bf16(float(ds10)));
    CHECK(dq[0] == 0.0f);
  }
}

// float32 runs the CPU's vector exp and row reductions (kernels/cpu/attention.cpp).
TEST_CASE("fused attention float32 vs float64: o, lse, all gradients over key tiles, row tails and hidden rows") {
  const Case cases[] = {
      {1, 2, 300, 300, 8, true, true, false, 0, 0},   // two key tiles, the second 44 keys wide
      {2, 1, 37, 37, 4, false, true, true, 0, 0},     // one tile of 37: a 5-key tail per row
      {1, 2, 3, 700, 4, true, false, false, 697, 0},  // decode rows against three tiles
      {1, 1, 5, 9, 4, true, true, false, 0, 3},       // rows 0-2 see no key (keys start at 3)
  };
  uint64_t seed = 100;
  for (const Case& c : cases) {
    INFO("B " << c.B << " H " << c.H << " Lq " << c.Lq << " Lk " << c.Lk << " causal " << c.causal);
    Generator gen(seed++);
    auto randn = [&](const Shape& s) { return Tensor::randn(s, gen, DType::F64); };
    Tensor q = randn({c.B, c.H, c.Lq, c.dh}), kk = randn({c.B, c.H, c.Lk, c.dh}), v = randn({c.B, c.H, c.Lk, c.dh});
    Tensor bias = c.bias ? randn({c.H, c.Lq + c.Lk - 1}) : Tensor();
    Tensor kp;
    if (c.padding) {
      std::vector<int64_t> pad(size_t(c.B * c.Lk), 0);
      for (int64_t b = 0; b < c.B; ++b) pad[size_t(b * c.Lk + 2 + b)] = 1;
      kp = Tensor::from_vector(pad, {c.B, c.Lk});
    }
    Tensor go = randn({c.B, c.H, c.Lq, c.dh});
    const k::AttentionArgs a{1.0, c.causal, c.q_off, c.k_off};  // scores of sd ~ sqrt(dh)
    auto f32 = [](const Tensor& t) { return t.defined() ? t.to(DType::F32) : Tensor(); };
    const k::AttentionOut o64 = k::attention(q, kk, v, bias, kp, a);
    const k::AttentionOut o32 = k::attention(f32(q), f32(kk), f32(v), f32(bias), kp, a);
    const k::AttentionGrads g64 = k::attention_backward(go, q, kk, v, bias, kp, o64, a);
    const k::AttentionGrads g32 = k::attention_backward(f32(go), f32(q), f32(kk), f32(v), f32(bias), kp, o32, a);
    CHECK(test::allclose(o32.o.to(DType::F64), o64.o, 2e-5, 2e-6));
    // lse: -inf where a row sees no key, equal as values elsewhere
    const std::vector<double> l64 = o64.lse.to_vector<double>(), l32 = o32.lse.to(DType::F64).to_vector<double>();
    for (size_t i = 0; i < l64.size(); ++i) {
      INFO("lse " << i);
      if (std::isinf(l64[i]))
        CHECK(l32[i] == l64[i]);
      else
        CHECK(std::abs(l32[i] - l64[i]) <= 2e-6 * (1 + std::abs(l64[i])));
    }
    CHECK(test::allclose(g32.dq.to(DType::F64), g64.dq, 1e-4, 1e-5));
    CHECK(test::allclose(g32.dk.to(DType::F64), g64.dk, 1e-4, 1e-5));
    CHECK(test::allclose(g32.dv.to(DType::F64), g64.dv, 1e-4, 1e-5));
    if (c.bias) CHECK(test::allclose(g32.dbias.to(DType::F64), g64.dbias, 1e-4, 1e-5));
  }
}
