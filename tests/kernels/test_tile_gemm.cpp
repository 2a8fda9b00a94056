// The fused attention's tile micro-kernels (kernels/cpu/tile_gemm.h): every ISA this CPU runs
// against a float64 product within the float32 bound, the SIMD kernels bit for bit equal to the
// scalar std::fma reference (the contract that keeps attention results independent of the ISA
// chosen), edges (row and column remainders of every size, no write outside C), both A layouts
// the attention uses, and the ISA switch `relpos info` reports.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/float16.h"
#include "kernels/cpu/bf16_convert.h"
#include "kernels/cpu/tile_gemm.h"
#include "kernels/ops.h"
#include "tests/cli_run.h"

using namespace relpos;
using k::cpu::TileGemm;
using k::cpu::TileIsa;

namespace {

struct Case {
  int64_t M, N, K;
  bool a_transposed, accumulate;
  float alpha;
  bool tight = false;  // A's leading dim without padding (1 for a one-row A^T)
};

struct Buffers {
  std::vector<float> a, b, c;  // c: [M + 2, ldc] with a sentinel border around the [M, N] block
  int64_t lda, ldb, ldc;
};

constexpr float kSentinel = 12345.0f;

Buffers make(const Case& cs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Buffers bf;
  bf.lda = (cs.a_transposed ? cs.M : cs.K) + (cs.tight ? 0 : 3);  // padded, like the heads' row stride
  bf.ldb = cs.N + 5;
  bf.ldc = cs.N + 7;
  bf.a.resize(size_t((cs.a_transposed ? cs.K : cs.M) * bf.lda));
  bf.b.resize(size_t(cs.K * bf.ldb));
  bf.c.assign(size_t((cs.M + 2) * bf.ldc), kSentinel);
  for (float& x : bf.a) x = nd(rng);
  for (float& x : bf.b) x = nd(rng);
  for (int64_t i = 0; i < cs.M; ++i)
    for (int64_t j = 0; j < cs.N; ++j) bf.c[size_t((i + 1) * bf.ldc + j)] = nd(rng);
  return bf;
}

TileGemm args(const Case& cs, Buffers& bf) {
  TileGemm g;
  g.M = cs.M, g.N = cs.N, g.K = cs.K, g.alpha = cs.alpha;
  g.a = bf.a.data();
  g.a_rs = cs.a_transposed ? 1 : bf.lda;
  g.a_cs = cs.a_transposed ? bf.lda : 1;
  g.b = bf.b.data(), g.ldb = bf.ldb;
  g.accumulate = cs.accumulate;
  g.c = bf.c.data() + bf.ldc;  // row 0 of the border is above C
  g.ldc = bf.ldc;
  return g;
}

// The largest |error| / bound over C against float64, bound = 2 (K + 2) u (|alpha| sum_k |a b| +
// |C0|): K fmas into acc and one into C.
double worst_error(const Case& cs, const Buffers& before, const Buffers& after) {
  const double u = std::ldexp(1.0, -24);
  double worst = 0;
  for (int64_t i = 0; i < cs.M; ++i)
    for (int64_t j = 0; j < cs.N; ++j) {
      double s = 0, mag = 0;
      for (int64_t k = 0; k < cs.K; ++k) {
        const double x = cs.a_transposed ? before.a[size_t(k * before.lda + i)] : before.a[size_t(i * before.lda + k)];
        const double y = before.b[size_t(k * before.ldb + j)];
        s += x * y;
        mag += std::abs(x * y);
      }
      const double c0 = cs.accumulate ? before.c[size_t((i + 1) * before.ldc + j)] : 0.0;
      const double want = c0 + double(cs.alpha) * s;
      const double bound = 2 * double(cs.K + 2) * u * (std::abs(double(cs.alpha)) * mag + std::abs(c0)) + 1e-30;
      worst = std::max(worst, std::abs(double(after.c[size_t((i + 1) * after.ldc + j)]) - want) / bound);
    }
  return worst;
}

// Every cell outside the [M, N] block still holds the sentinel.
bool border_intact(const Case& cs, const Buffers& bf) {
  for (int64_t i = 0; i < cs.M + 2; ++i)
    for (int64_t j = 0; j < bf.ldc; ++j) {
      const bool inside = i >= 1 && i <= cs.M && j < cs.N;
      if (!inside && bf.c[size_t(i * bf.ldc + j)] != kSentinel) return false;
    }
  return true;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  // The attention's shapes (dh 32 and 64, tiles of 64 rows and up to 256 keys), then every row
  // remainder of the 12-row and 6-row blocks and column remainders around 8, 16 and 32.
  for (bool t : {false, true})
    for (bool acc : {false, true}) {
      out.push_back({64, 256, 32, t, acc, 0.17f});
      out.push_back({64, 32, 256, t, acc, 1.0f});
      out.push_back({256, 64, 64, t, acc, -0.5f});
      for (int64_t m = 1; m <= 13; ++m) out.push_back({m, 37, 19, t, acc, 1.0f});
      for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 33, 47, 48, 63, 65}) out.push_back({25, n, 11, t, acc, 0.25f});
      out.push_back({5, 5, 0, t, acc, 1.0f});  // K = 0: C = C (accumulate) or 0
      // one row or one inner index with unit leading dims (a one-key attention tile: dK = dS^T Q
      // with dS [r, 1]): every stride of A is 1
      out.push_back({1, 20, 3, t, acc, 0.5f, true});
      out.push_back({3, 20, 1, t, acc, 0.5f, true});
    }
  return out;
}

}  // namespace

TEST_CASE(
    "tile_gemm: every ISA this CPU runs matches float64, the SIMD ones bit for bit equal to the scalar "
    "reference, and nothing outside C is written",
    "[kernels][tile_gemm]") {
  int ran_simd = 0;
  for (TileIsa isa : {TileIsa::Scalar, TileIsa::Avx512Bf16, TileIsa::Avx512, TileIsa::Avx2, TileIsa::OpenBLAS}) {
    if (!k::cpu::tile_isa_supported(isa)) continue;
    if (isa == TileIsa::Avx512 || isa == TileIsa::Avx2) ++ran_simd;
    uint64_t seed = 1;
    for (const Case& cs : cases()) {
      const Buffers before = make(cs, seed++);
      Buffers got = before, ref = before;
      k::cpu::tile_gemm(isa, args(cs, got));
      k::cpu::tile_gemm(TileIsa::Scalar, args(cs, ref));
      INFO(k::cpu::tile_isa_name(isa) << " M=" << cs.M << " N=" << cs.N << " K=" << cs.K << " A^T=" << cs.a_transposed
                                      << " accumulate=" << cs.accumulate << " alpha=" << cs.alpha);
      CHECK(worst_error(cs, before, got) <= 1.0);
      CHECK(border_intact(cs, got));
      if (isa != TileIsa::OpenBLAS) CHECK(std::memcmp(got.c.data(), ref.c.data(), got.c.size() * sizeof(float)) == 0);
    }
  }
#if defined(__x86_64__)
  // This project's CPUs (x86-64 with AVX2 at least) must run a SIMD kernel, not only the fallbacks.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) CHECK(ran_simd >= 1);
#endif
}

TEST_CASE("tile_gemm: an A with neither stride 1 is a named error on every ISA, not a wrong product",
          "[kernels][tile_gemm]") {
  std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, 0.0f);
  TileGemm g;
  g.M = 2, g.N = 2, g.K = 2, g.a = a.data(), g.a_rs = 8, g.a_cs = 2, g.b = b.data(), g.ldb = 2, g.c = c.data(),
  g.ldc = 2;
  for (TileIsa isa : {TileIsa::Scalar, TileIsa::Avx512, TileIsa::Avx2, TileIsa::OpenBLAS})
    if (k::cpu::tile_isa_supported(isa))
      CHECK_THROWS_WITH(k::cpu::tile_gemm(isa, g), Catch::Contains("must have one of them 1"));
}

TEST_CASE("tile_gemm: a NaN or inf in A or B reaches C as IEEE arithmetic says, on every ISA", "[kernels][tile_gemm]") {
  for (TileIsa isa : {TileIsa::Avx512, TileIsa::Avx2, TileIsa::OpenBLAS}) {
    if (!k::cpu::tile_isa_supported(isa)) continue;
    const Case cs{13, 33, 9, false, false, 1.0f};
    Buffers bf = make(cs, 99);
    bf.a[size_t(4 * bf.lda + 2)] = std::numeric_limits<float>::quiet_NaN();  // row 4 of C becomes NaN
    bf.b[size_t(3 * bf.ldb + 20)] = std::numeric_limits<float>::infinity();  // column 20: +-inf or NaN
    k::cpu::tile_gemm(isa, args(cs, bf));
    INFO(k::cpu::tile_isa_name(isa));
    for (int64_t j = 0; j < cs.N; ++j) CHECK(std::isnan(bf.c[size_t(5 * bf.ldc + j)]));
    for (int64_t i = 0; i < cs.M; ++i) CHECK(!std::isfinite(bf.c[size_t((i + 1) * bf.ldc + 20)]));
    CHECK(std::isfinite(bf.c[size_t(1 * bf.ldc + 0)]));
  }
}

TEST_CASE(
    "tile_gemm: relpos info names the attention tile kernels, RELPOS_TILE_GEMM forces one and a wrong "
    "value is named",
    "[kernels][tile_gemm]") {
  const std::string path = k::cpu_attention_tile_path();
  const auto info = test::cli_run("info");
  REQUIRE(info.code == 0);
  CHECK(info.out.find("CPU attention tiles: " + path) != std::string::npos);
  const auto forced = test::shell_run("RELPOS_TILE_GEMM=openblas " + test::shell_quote(RELPOS_CLI_PATH) + " info");
  CHECK(forced.code == 0);
  CHECK(forced.out.find("CPU attention tiles: OpenBLAS sgemm per tile") != std::string::npos);
  CHECK(forced.out.find("[RELPOS_TILE_GEMM]") != std::string::npos);
  const auto bad = test::shell_run("RELPOS_TILE_GEMM=neon " + test::shell_quote(RELPOS_CLI_PATH) + " info");
  CHECK(bad.code != 0);
  CHECK(bad.out.find("RELPOS_TILE_GEMM=neon: expected 'amxbf16', 'avx512bf16', 'avx512', 'avx2' or 'openblas'") !=
        std::string::npos);
  if (k::cpu::tile_isa_supported(TileIsa::Avx512)) {  // avx512 alone: no bf16 pair products
    const auto plain = test::shell_run("RELPOS_TILE_GEMM=avx512 " + test::shell_quote(RELPOS_CLI_PATH) + " info");
    CHECK(plain.code == 0);
    CHECK(plain.out.find("CPU attention tiles: avx512 micro-kernels (12 x 32 blocks) [RELPOS_TILE_GEMM]") !=
          std::string::npos);
  }
  CHECK((k::cpu::tile_isa() == TileIsa::Avx512Bf16) == (path.find("avx512bf16 (vdpbf16ps)") != std::string::npos));
  CHECK((k::cpu::tile_isa() == TileIsa::AmxBf16) == (path.find("AMX tiles (tdpbf16ps)") != std::string::npos));
  // By default: AMX where the CPU has it, else the pairs where it has AVX512-BF16, except on
  // Intel's (slower there than the float32 tiles: tile_gemm.cpp, best_isa).
  if (!std::getenv("RELPOS_TILE_GEMM")) {
    const bool amx = k::cpu::tile_isa_supported(TileIsa::AmxBf16);
    CHECK((k::cpu::tile_isa() == TileIsa::AmxBf16) == amx);
    CHECK((k::cpu::tile_isa() == TileIsa::Avx512Bf16) ==
          (!amx && k::cpu::tile_isa_supported(TileIsa::Avx512Bf16) && !__builtin_cpu_is("intel")));
  }
}

TEST_CASE("tile_gemm: the default tile ISA for each kind of CPU", "[kernels][tile_gemm]") {
  using k::cpu::default_tile_isa;
  using k::cpu::TileCpu;
  // AMX first; the vdpbf16ps pairs only off Intel (slower than the float32 tiles on a Xeon)
  CHECK(default_tile_isa({true, true, true, true, true}) == TileIsa::AmxBf16);
  CHECK(default_tile_isa({false, true, true, true, true}) == TileIsa::Avx512);
  CHECK(default_tile_isa({false, true, true, true, false}) == TileIsa::Avx512Bf16);
  CHECK(default_tile_isa({false, false, true, true, false}) == TileIsa::Avx512);
  CHECK(default_tile_isa({false, false, false, true, true}) == TileIsa::Avx2);
  CHECK(default_tile_isa({false, false, false, false, false}) == TileIsa::OpenBLAS);
}

TEST_CASE("tile_gemm: the CPU is asked what it runs once per process, not once per product", "[kernels][tile_gemm]") {
  // Every tile product checks its ISA; CPUID is a VM exit under a hypervisor, and asked per
  // product it took 44% of a T = 2048 training step on a KVM Xeon.
  for (int i = 0; i < k::cpu::kTileIsaCount; ++i) (void)k::cpu::tile_isa_supported(TileIsa(i));
  const int64_t before = k::cpu::tile_isa_probes();
  std::vector<float> a(64 * 32, 1.0f), b(32 * 64, 0.5f), c(64 * 64, 0.0f);
  std::vector<uint32_t> pa(64 * 16, 0x3f803f80u), pb(16 * 64, 0x3f003f00u);  // bf16 pairs (1, 1), (0.5, 0.5)
  for (int rep = 0; rep < 3; ++rep) {
    for (int i = 0; i < k::cpu::kTileIsaCount; ++i) {
      const auto isa = TileIsa(i);
      CHECK(k::cpu::tile_isa_supported(isa) == k::cpu::tile_isa_supported(isa));
      if (!k::cpu::tile_isa_supported(isa)) continue;
      k::cpu::TileGemm g;
      g.M = 64, g.N = 64, g.K = 32, g.a = a.data(), g.a_rs = 32, g.b = b.data(), g.ldb = 64, g.c = c.data(), g.ldc = 64;
      k::cpu::tile_gemm(isa, g);
      CHECK(c[0] == 16.0f);
      if (isa == TileIsa::AmxBf16 || isa == TileIsa::Avx512Bf16 || isa == TileIsa::Scalar) {
        k::cpu::TilePairs p;
        p.M = 64, p.N = 64, p.pairs = 16, p.a = pa.data(), p.a_rs = 16, p.a_ps = 1, p.b = pb.data(), p.ldb = 64;
        p.c = c.data(), p.ldc = 64;
        k::cpu::tile_gemm_pairs(isa, p);
        CHECK(c[0] == 16.0f);
      }
    }
  }
  CHECK(k::cpu::tile_isa_probes() == before);
  CHECK_FALSE(k::cpu::tile_isa_supported(TileIsa(k::cpu::kTileIsaCount)));
}

// AMX (tdpbf16ps) adds the products of each 32-long step of K in its own order (the even and odd
// ones apart, then into the accumulator; Intel SDM), not the fma sequence: every element of C
// within (K + 4) float32 roundings of the float64 value on the same bf16 values (exact(i, j) gives
// it and the sum of the magnitudes it is made of), nothing outside C written (got and ref32 hold
// the same sentinels and C0 there). C's row i is at (i + 1) ldc.
void check_amx(const std::vector<float>& got, const std::vector<float>& ref32, int64_t M, int64_t N, int64_t K,
               int64_t ldc, const std::function<std::pair<double, double>(int64_t, int64_t)>& exact) {
  int64_t outside = 0, far = 0;
  double worst = 0;
  for (int64_t idx = 0; idx < int64_t(got.size()); ++idx) {
    const int64_t i = idx / ldc - 1, j = idx % ldc;
    if (i < 0 || i >= M || j >= N) {
      outside += std::memcmp(&got[size_t(idx)], &ref32[size_t(idx)], sizeof(float)) != 0;
      continue;
    }
    const auto [value, magnitude] = exact(i, j);
    const double err = std::abs(double(got[size_t(idx)]) - value), bound = double(K + 4) * 0x1p-24 * magnitude;
    far += !(err <= bound);
    worst = std::max(worst, bound > 0 ? err / bound : err);
  }
  INFO("worst error / bound " << worst);
  CHECK(outside == 0);
  CHECK(far == 0);
}

TEST_CASE(
    "tile_gemm_pairs: bf16 pairs (vdpbf16ps) give the float32 fma sequence on the same values bit for bit, AMX "
    "within (K + 4) float32 roundings of float64, at every edge, writing nothing outside C",
    "[kernels][tile_gemm][precision]") {
  using k::cpu::TilePairs;
  const bool hw = k::cpu::tile_isa_supported(TileIsa::Avx512Bf16);
  if (!hw) WARN("this CPU has no AVX512-BF16: only the scalar pair reference is checked");
  std::vector<std::array<int64_t, 3>> shapes = {{64, 256, 32}, {64, 128, 32}, {64, 200, 64}, {3, 5, 2}};
  for (int64_t m = 1; m <= 13; ++m) shapes.push_back({m, 37, 20});
  for (int64_t n : {1, 15, 16, 17, 31, 33, 63}) shapes.push_back({25, n, 6});
  uint64_t seed = 7;
  for (const auto& [M, N, K] : shapes) {
    INFO("M=" << M << " N=" << N << " K=" << K);
    std::mt19937_64 rng(seed++);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    // A [M, K] (row stride K + 2), Bt [N, K] (B = Bt^T, the keys of one head), raw and rounded
    const int64_t lda = K + 2;
    std::vector<float> a(size_t(M * lda)), bt(size_t(N * K)), ar(a.size()), b(size_t(K * N));
    for (float& x : a) x = nd(rng) * 3.0f;
    for (float& x : bt) x = nd(rng) * 0.05f;
    for (size_t i = 0; i < a.size(); ++i) ar[i] = round_to_bf16(a[i]);
    for (int64_t j = 0; j < N; ++j)
      for (int64_t kk = 0; kk < K; ++kk) b[size_t(kk * N + j)] = round_to_bf16(bt[size_t(j * K + kk)]);
    k::cpu::Scratch<uint32_t> sa, sb, sa_r;
    const uint32_t* pa = k::cpu::pack_pairs_rows(a.data(), lda, M, K, sa);
    const std::vector<uint32_t> aw(pa, pa + M * K / 2);
    const uint32_t* pa_r = k::cpu::pack_pairs_rows(ar.data(), lda, M, K, sa_r);
    CHECK(aw == std::vector<uint32_t>(pa_r, pa_r + M * K / 2));  // packing rounds to nearest even
    const uint32_t* pb = k::cpu::pack_pairs_cols(bt.data(), K, N, K, sb);
    const std::vector<uint32_t> bw(pb, pb + K / 2 * N);
    REQUIRE(sb.capacity() >= size_t(K / 2 * N));
    // the float32 reference on the rounded values
    const int64_t ldc = N + 3;
    std::vector<float> ref(size_t((M + 2) * ldc), kSentinel);
    TileGemm g;
    g.M = M, g.N = N, g.K = K, g.alpha = 0.125f;
    g.a = ar.data(), g.a_rs = lda, g.a_cs = 1;
    g.b = b.data(), g.ldb = N;
    g.c = ref.data() + ldc, g.ldc = ldc;
    k::cpu::tile_gemm(TileIsa::Scalar, g);
    for (TileIsa isa : {TileIsa::Scalar, TileIsa::Avx512Bf16}) {
      if (isa == TileIsa::Avx512Bf16 && !hw) continue;
      INFO(k::cpu::tile_isa_name(isa));
      std::vector<float> got(ref.size(), kSentinel);
      k::cpu::tile_gemm_pairs(isa,
                              TilePairs{M, N, K / 2, 0.125f, aw.data(), K / 2, bw.data(), N, got.data() + ldc, ldc});
      CHECK(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)) == 0);  // sentinels included
    }
    if (k::cpu::tile_isa_supported(TileIsa::AmxBf16)) {
      INFO("amxbf16");
      std::vector<float> got(ref.size(), kSentinel);
      k::cpu::tile_gemm_pairs(TileIsa::AmxBf16,
                              TilePairs{M, N, K / 2, 0.125f, aw.data(), K / 2, bw.data(), N, got.data() + ldc, ldc});
      const int64_t k_len = K, n_len = N;  // (clang 14 cannot capture a structured binding)
      check_amx(got, ref, M, N, K, ldc, [&](int64_t i, int64_t j) {
        double v = 0, m = 0;
        for (int64_t kk = 0; kk < k_len; ++kk) {
          const double t = double(ar[size_t(i * lda + kk)]) * double(b[size_t(kk * n_len + j)]);
          v += t, m += std::abs(t);
        }
        return std::pair{0.125 * v, 0.125 * m};
      });
    }
  }
  // A NaN stays a NaN when packed (the bf16 rounding's carry must not turn it into an infinity).
  std::vector<float> x = {std::numeric_limits<float>::quiet_NaN(), 1.0f, -std::numeric_limits<float>::infinity(), 2.0f};
  k::cpu::Scratch<uint32_t> sw;
  const uint32_t* pw = k::cpu::pack_pairs_rows(x.data(), 4, 1, 4, sw);
  const std::vector<uint32_t> w(pw, pw + 2);
  CHECK(((w[0] >> 16) & 0x7f80u) == 0x7f80u);
  CHECK(((w[0] >> 16) & 0x7fu) != 0);  // NaN: a nonzero mantissa
  CHECK((w[1] >> 16) == 0xff80u);      // -inf
  // An odd row ends in a word with a zero low half.
  const uint32_t* po = k::cpu::pack_pairs_rows(x.data() + 1, 4, 1, 3, sw);
  CHECK(po[0] == (0x3f80u << 16 | 0xff80u));  // (1, -inf)
  CHECK(po[1] == 0x40000000u);                // (2, 0)
  if (!hw)
    CHECK_THROWS_WITH(
        k::cpu::tile_gemm_pairs(TileIsa::Avx512Bf16, TilePairs{1, 1, 1, 1.0f, w.data(), 1, w.data(), 1, x.data(), 1}),
        Catch::Contains("which this CPU lacks"));
}

TEST_CASE(
    "tile_gemm_pairs: the probability products (odd K, accumulate, A read transposed from row pairs) give the float32 "
    "fma sequence bit for bit, AMX within (K + 4) float32 roundings of float64",
    "[kernels][tile_gemm][precision]") {
  // The fused attention's O += P V, dQ += s dS K (A = the tile's rows as pairs, B = rows as row
  // pairs) and dK += s dS^T Q, dV += P^T dO (A = the tile transposed, read from its row pairs):
  // K = the tile's width or height, odd at the causal edge, padded with a zero half on both sides.
  using k::cpu::TilePairs;
  const bool hw = k::cpu::tile_isa_supported(TileIsa::Avx512Bf16);
  if (!hw) WARN("this CPU has no AVX512-BF16: only the scalar pair reference is checked");
  uint64_t seed = 91;
  for (const bool transposed : {false, true})
    for (const auto& [r, c, dh] : std::vector<std::array<int64_t, 3>>{
             {64, 256, 32}, {64, 77, 32}, {13, 77, 15}, {1, 1, 16}, {7, 3, 33}, {64, 129, 64}, {2, 5, 1}}) {
      INFO((transposed ? "x^T Y" : "x Y") << " r=" << r << " c=" << c << " dh=" << dh);
      std::mt19937_64 rng(seed++);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      const int64_t M = transposed ? c : r, K = transposed ? r : c, ldy = dh + 3, ldc = dh + 2;
      std::vector<float> x(size_t(r * c)), xr(x.size()), y(size_t(K * ldy)), yr(y.size());
      for (float& v : x) v = std::abs(nd(rng)) * 0.01f;  // probabilities / dS-sized
      for (float& v : y) v = nd(rng);
      for (size_t i = 0; i < x.size(); ++i) xr[i] = round_to_bf16(x[i]);
      for (size_t i = 0; i < y.size(); ++i) yr[i] = round_to_bf16(y[i]);
      std::vector<float> c0(size_t((M + 2) * ldc));
      for (float& v : c0) v = nd(rng);
      // the float32 reference on the rounded values, accumulating into c0
      std::vector<float> ref = c0;
      TileGemm g;
      g.M = M, g.N = dh, g.K = K, g.alpha = 0.375f;
      g.a = xr.data(), g.a_rs = transposed ? 1 : c, g.a_cs = transposed ? c : 1;
      g.b = yr.data(), g.ldb = ldy, g.accumulate = true;
      g.c = ref.data() + ldc, g.ldc = ldc;
      k::cpu::tile_gemm(TileIsa::Scalar, g);
      k::cpu::Scratch<uint32_t> sx, sy;
      const int64_t np = (K + 1) / 2;
      const uint32_t* yw = k::cpu::pack_row_pairs(y.data(), ldy, K, dh, sy);  // rounds while packing
      for (int64_t p = 0; p < np; ++p)
        for (int64_t j = 0; j < dh; ++j) {
          const float lo = 2 * p + 1 < K ? yr[size_t((2 * p + 1) * ldy + j)] : 0.0f;
          REQUIRE(yw[p * dh + j] == (uint32_t(bf16_bits(yr[size_t(2 * p * ldy + j)])) << 16 | bf16_bits(lo)));
        }
      TilePairs pg{M, dh, np, 0.375f, nullptr, 0, yw, dh, nullptr, ldc};
      pg.accumulate = true;
      if (transposed) {
        pg.a = k::cpu::pack_row_pairs(x.data(), c, r, c, sx);
        pg.a_rs = 1, pg.a_ps = c;
      } else {
        pg.a = k::cpu::pack_pairs_rows(x.data(), c, r, c, sx);
        pg.a_rs = np;
      }
      for (TileIsa isa : {TileIsa::Scalar, TileIsa::Avx512Bf16}) {
        if (isa == TileIsa::Avx512Bf16 && !hw) continue;
        INFO(k::cpu::tile_isa_name(isa));
        std::vector<float> got = c0;
        pg.c = got.data() + ldc;
        k::cpu::tile_gemm_pairs(isa, pg);
        CHECK(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)) == 0);  // rows outside C untouched
      }
      if (k::cpu::tile_isa_supported(TileIsa::AmxBf16)) {
        INFO("amxbf16");
        std::vector<float> got = c0;
        pg.c = got.data() + ldc;
        k::cpu::tile_gemm_pairs(TileIsa::AmxBf16, pg);
        const int64_t cols = c;  // (clang 14 cannot capture a structured binding)
        check_amx(got, ref, M, dh, K, ldc, [&](int64_t i, int64_t j) {
          const double prev = c0[size_t((i + 1) * ldc + j)];
          double v = 0, m = 0;
          for (int64_t kk = 0; kk < K; ++kk) {
            const double xv = transposed ? xr[size_t(kk * cols + i)] : xr[size_t(i * cols + kk)];
            const double t = xv * double(yr[size_t(kk * ldy + j)]);
            v += t, m += std::abs(t);
          }
          return std::pair{prev + 0.375 * v, std::abs(prev) + 0.375 * m};
        });
      }
    }
}

TEST_CASE(
    "bf16_col_pair_words_native: the pair words of two rows stored by column and the columns' float64 sums, every "
    "edge, nothing written past a row's pairs: as A they give the strided row pairs' products bit for bit",
    "[kernels][tile_gemm][precision]") {
  // X^T as the row-major A operand (the weight gradients' dY^T, the attention backward's P^T and
  // dS^T): out[i ldo + p] = (x[2p, i], x[2p + 1, i]); the 16 x 16 in-register transpose at every
  // partial block of columns and of pairs, an odd row count's zero low half.
  if (!k::cpu::cpu_converts_bf16()) {
    WARN("this CPU has no AVX512-BF16 conversion: bf16_col_pair_words_native is never called here");
    return;
  }
  using k::cpu::TilePairs;
  uint64_t seed = 131;
  for (int64_t rows : {1, 2, 3, 31, 32, 33, 64, 65})
    for (int64_t cols : {1, 15, 16, 17, 33, 130}) {
      INFO("rows=" << rows << " cols=" << cols);
      std::mt19937_64 rng(seed++);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      const int64_t ld = cols + 5, np = (rows + 1) / 2, ldo = np + 3;
      std::vector<float> x(size_t(rows * ld));
      for (float& v : x) v = nd(rng);
      std::vector<uint32_t> out(size_t(cols * ldo), 0xDEADBEEFu), out2(out.size(), 0xDEADBEEFu);
      k::cpu::bf16_col_pair_words_native(x.data(), ld, rows, cols, out.data(), ldo);
      // with the column sums: the same words, and each sum the float64 one with the rows in order
      std::vector<double> sums(size_t(cols + 1), -1.0);
      k::cpu::bf16_col_pair_words_native(x.data(), ld, rows, cols, out2.data(), ldo, sums.data());
      CHECK(out2 == out);
      bool sums_ok = sums[size_t(cols)] == -1.0;
      for (int64_t i = 0; i < cols; ++i) {
        double s = 0.0;
        for (int64_t r = 0; r < rows; ++r) s += double(x[size_t(r * ld + i)]);
        sums_ok = sums_ok && sums[size_t(i)] == s;
      }
      CHECK(sums_ok);
      bool words_ok = true, untouched = true;
      for (int64_t i = 0; i < cols; ++i)
        for (int64_t p = 0; p < ldo; ++p) {
          const uint32_t w = out[size_t(i * ldo + p)];
          if (p >= np) {
            untouched = untouched && w == 0xDEADBEEFu;
            continue;
          }
          const float lo = 2 * p + 1 < rows ? x[size_t((2 * p + 1) * ld + i)] : 0.0f;
          words_ok = words_ok && w == (uint32_t(bf16_bits(x[size_t(2 * p * ld + i)])) << 16 | bf16_bits(lo));
        }
      CHECK(words_ok);
      CHECK(untouched);
      // C = X^T Y from these words (a_ps = 1) and from pack_row_pairs' words read with stride cols.
      const int64_t N = 19;
      std::vector<float> y(size_t(rows * N));
      for (float& v : y) v = nd(rng);
      k::cpu::Scratch<uint32_t> sx, sy;
      const uint32_t* yw = k::cpu::pack_row_pairs(y.data(), N, rows, N, sy);
      const uint32_t* xw = k::cpu::pack_row_pairs(x.data(), ld, rows, cols, sx);
      for (TileIsa isa : {TileIsa::Avx512Bf16, TileIsa::AmxBf16}) {
        if (!k::cpu::tile_isa_supported(isa)) continue;
        INFO(k::cpu::tile_isa_name(isa));
        std::vector<float> by_rows(size_t(cols * N)), strided(by_rows.size());
        k::cpu::tile_gemm_pairs(isa, TilePairs{cols, N, np, 0.5f, out.data(), ldo, yw, N, by_rows.data(), N});
        TilePairs g{cols, N, np, 0.5f, xw, 1, yw, N, strided.data(), N};
        g.a_ps = cols;
        k::cpu::tile_gemm_pairs(isa, g);
        CHECK(std::memcmp(by_rows.data(), strided.data(), by_rows.size() * sizeof(float)) == 0);
      }
    }
}

TEST_CASE("pack_pairs_cols: each row's pair words stored by column, every edge, the scalar words bit for bit",
          "[kernels][tile_gemm][precision]") {
  // B = X^T for the pair kernels (the weights of X W^T, the keys and values of a head): on a CPU
  // with the bf16 conversion, 16 x 16 blocks of words transposed in registers; the same words as
  // pair_word on the same values (round to nearest even; no subnormal inputs here).
  uint64_t seed = 171;
  for (int64_t rows : {1, 5, 16, 17, 40})
    for (int64_t cols : {2, 6, 30, 32, 34, 66}) {
      INFO("rows=" << rows << " cols=" << cols);
      std::mt19937_64 rng(seed++);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      const int64_t ld = cols + 3;
      std::vector<float> x(size_t(rows * ld));
      for (float& v : x) v = nd(rng);
      k::cpu::Scratch<uint32_t> s;
      const uint32_t* w = k::cpu::pack_pairs_cols(x.data(), ld, rows, cols, s);
      bool ok = true;
      for (int64_t p = 0; p < cols / 2; ++p)
        for (int64_t r = 0; r < rows; ++r) {
          const uint32_t want =
              uint32_t(bf16_bits(x[size_t(r * ld + 2 * p)])) << 16 | bf16_bits(x[size_t(r * ld + 2 * p + 1)]);
          ok = ok && w[p * rows + r] == want;
        }
      CHECK(ok);
    }
}
