// The fused attention's tile micro-kernels (kernels/cpu/tile_gemm.h): every ISA this CPU runs
// against a float64 product within the float32 bound, the SIMD kernels bit for bit equal to the
// scalar std::fma reference (the contract that keeps attention results independent of the ISA
// chosen), edges (row and column remainders of every size, no write outside C), both A layouts
// the attention uses, and the ISA switch `relpos info` reports.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

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
  for (TileIsa isa : {TileIsa::Scalar, TileIsa::Avx512, TileIsa::Avx2, TileIsa::OpenBLAS}) {
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
  CHECK(bad.out.find("RELPOS_TILE_GEMM=neon: expected 'avx512', 'avx2' or 'openblas'") != std::string::npos);
}
