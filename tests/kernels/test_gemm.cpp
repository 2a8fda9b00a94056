// The CPU GEMM provider (kernels/cpu/gemm.h): every layout and a K past the chunk length against
// a float64 loop, the same bits at every thread count (oneDNN's K-parallel reduction avoided),
// bf16 operands on the bf16 units against float64 from the same bf16 values, and the path
// `relpos info` reports.
#include <algorithm>
#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/float16.h"
#include "kernels/cpu/tile_gemm.h"
#include "kernels/ops.h"
#include "tests/cli_run.h"

using namespace relpos;

namespace {

// C = op(A) op(B) in float64 from the float32 values of the (possibly transposed) views.
std::vector<double> reference(const Tensor& a, const Tensor& b) {
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const std::vector<float> A = ac.to_vector<float>(), B = bc.to_vector<float>();
  std::vector<double> C(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t e = 0; e < K; ++e) {
      const double x = A[size_t(i * K + e)];
      for (int64_t j = 0; j < N; ++j) C[size_t(i * N + j)] += x * double(B[size_t(e * N + j)]);
    }
  return C;
}

// |C - ref| <= 2 K u sum_e |a_ie b_ej| elementwise (float32 accumulation in any order).
void check_close(const Tensor& c, const Tensor& a, const Tensor& b, const std::string& what) {
  const std::vector<double> ref = reference(a, b);
  const std::vector<double> mag = reference(k::unary(k::Unary::Abs, a), k::unary(k::Unary::Abs, b));
  const std::vector<float> got = c.contiguous().to_vector<float>();
  const double K = double(a.size(1)), u = std::ldexp(1.0, -24);
  double worst = 0;  // the largest error as a fraction of its bound
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::abs(double(got[i]) - ref[i]) / (2 * K * u * mag[i] + 1e-30));
  INFO(what << ": worst error / bound = " << worst);
  CHECK(worst <= 1.0);
}

Tensor bf16_valued(const Shape& s, uint64_t seed) {
  Generator g(seed);
  return k::unary(k::Unary::RoundBF16, Tensor::randn(s, g));
}

bool bitwise_equal(const Tensor& x, const Tensor& y) {
  const std::vector<float> a = x.to_vector<float>(), b = y.to_vector<float>();
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A, B in every transposition: x^T is the transposed view of a [cols, rows] tensor.
Tensor operand(const Shape& s, bool trans, uint64_t seed, bool bf16) {
  const Shape stored = trans ? Shape{s[1], s[0]} : s;
  Generator g(seed);
  Tensor t = bf16 ? bf16_valued(stored, seed) : Tensor::randn(stored, g);
  return trans ? t.transpose(0, 1) : t;
}

// The quickstart trained 2 steps by `relpos train` into a temporary run directory (removed again),
// with env ("VAR=value ", or "") before the command.
test::CliRun quickstart_two_steps(const std::string& env, const std::string& dir_name) {
  const std::string dir = (std::filesystem::temp_directory_path() / dir_name).string();
  auto run = test::shell_run(env + test::shell_quote(RELPOS_CLI_PATH) +
                             " train configs/quickstart.yaml --set train.steps=2 --set optim.warmup=0 "
                             "--set train.eval_every=2 --set output.dir=" +
                             test::shell_quote(dir));
  std::filesystem::remove_all(dir);
  return run;
}

}  // namespace

TEST_CASE("gemm: float32 products in every layout match float64, K past the 1024 chunk included", "[kernels][gemm]") {
  INFO("path: " << k::cpu_gemm_path(k::GemmInputs::F32));
  for (auto [M, N, K] : {std::array<int64_t, 3>{1, 1, 1}, {7, 5, 3}, {64, 48, 1024}, {33, 17, 1025}, {96, 80, 2500}}) {
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Tensor a = operand({M, K}, ta, 11 + M, false), b = operand({K, N}, tb, 23 + N, false);
        check_close(k::matmul(a, b), a, b, fmt::format("M={} N={} K={} ta={} tb={}", M, N, K, ta, tb));
      }
  }
  // A row stride wider than the row (a narrowed view) goes in with its leading dim.
  Generator g(5);
  Tensor wide = Tensor::randn({40, 300}, g).narrow(1, 10, 200);
  Tensor b = Tensor::randn({200, 30}, g);
  check_close(k::matmul(wide, b), wide, b, "lda > K");
}

TEST_CASE("gemm: the same bits at 1, 2 and 3 threads, weight-gradient shapes with K up to 8192 included",
          "[kernels][gemm][determinism]") {
  const int before = k::num_threads();
  // dW = x^T dy: A transposed, small M x N, long K: where oneDNN would split K across threads.
  for (auto [M, N, K] : {std::array<int64_t, 3>{64, 64, 8192},
                         {32, 32, 16384},
                         {16, 16, 4096},
                         {128, 512, 2048},
                         {256, 256, 2048},
                         {2048, 256, 256},
                         // where oneDNN's AMX kernels cut K by the thread count (Xeon, bf16)
                         {512, 512, 1024},
                         {256, 1024, 768},
                         // more than one K chunk with many rows (fc1's dx, fc2 in the small model)
                         {2048, 256, 1024},
                         {128, 512, 1024},
                         {256, 256, 1024},
                         {64, 64, 1024},
                         {64, 64, 3072}})  // three chunks on two threads: the last one alone
    for (k::GemmInputs in : {k::GemmInputs::F32, k::GemmInputs::BF16})
      for (int layout = 0; layout < 4; ++layout) {
        const bool bf16 = in == k::GemmInputs::BF16;
        Tensor a = operand({M, K}, layout < 2, 3, bf16), b = operand({K, N}, layout % 2 == 1, 4, bf16);
        k::set_num_threads(1);
        const Tensor c1 = k::matmul(a, b, in);
        k::set_num_threads(2);
        const Tensor c2 = k::matmul(a, b, in);
        k::set_num_threads(3);
        const Tensor c3 = k::matmul(a, b, in);
        INFO("M=" << M << " N=" << N << " K=" << K << (bf16 ? " bf16" : " f32") << " layout " << layout);
        CHECK(bitwise_equal(c1, c2));
        CHECK(bitwise_equal(c1, c3));
      }
  // With a bias and an activation (fc1): float32 blocks of rows go to the threads whole, each
  // multiplied by one thread; 2048 x 1024 is eight blocks, 1100 x 512 two and a part.
  Generator g(5);
  for (auto [M, N, K] : {std::array<int64_t, 3>{2048, 1024, 256}, {1100, 512, 128}}) {
    const Tensor a = Tensor::randn({M, K}, g), w = Tensor::randn({N, K}, g), bias = Tensor::randn({N}, g);
    std::vector<k::MatmulActOut> outs;
    for (int threads : {1, 2, 3}) {
      k::set_num_threads(threads);
      outs.push_back(k::matmul_act(a, w.transpose(0, 1), k::GemmInputs::F32, false, bias, k::Unary::GeluErf, true));
    }
    INFO("M=" << M << " N=" << N << " K=" << K << " with bias and GELU");
    for (size_t i = 1; i < outs.size(); ++i) {
      CHECK(bitwise_equal(outs[0].y, outs[i].y));
      CHECK(bitwise_equal(outs[0].act_grad, outs[i].act_grad));
    }
  }
  k::set_num_threads(before);
}

TEST_CASE("gemm: bf16 operands multiply with float32 accumulation, as float64 from the same bf16 values",
          "[kernels][gemm][precision]") {
  const std::string path = k::cpu_gemm_path(k::GemmInputs::BF16);
  INFO("path: " << path);
  // With AMX the products run on relpos's pair kernel; the float32 tiles' ISA sends them to oneDNN's.
  std::vector<std::optional<k::cpu::TileIsa>> isas{std::nullopt};
  if (k::cpu::tile_isa() == k::cpu::TileIsa::AmxBf16) isas.push_back(k::cpu::TileIsa::Avx512);
  for (const auto& isa : isas) {
    k::cpu::set_tile_isa(isa);
    for (auto [M, N, K] :
         {std::array<int64_t, 3>{5, 3, 7}, {64, 96, 128}, {130, 70, 1500}, {33, 17, 513}, {128, 128, 2048}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          Tensor a = operand({M, K}, ta, 7, true), b = operand({K, N}, tb, 8, true);
          check_close(k::matmul(a, b, k::GemmInputs::BF16), a, b,
                      fmt::format("bf16 M={} N={} K={} ta={} tb={} tiles {}", M, N, K, ta, tb,
                                  k::cpu::tile_isa_name(k::cpu::tile_isa())));
        }
  }
  k::cpu::set_tile_isa(std::nullopt);
  // NaN and inf operands propagate as in float32.
  Tensor a = bf16_valued({4, 8}, 1), b = bf16_valued({8, 4}, 2);
  std::vector<float> av = a.to_vector<float>();
  av[0] = std::nanf("");
  av[9] = INFINITY;
  Tensor an = Tensor::from_vector(av, {4, 8});
  const std::vector<float> c = k::matmul(an, b, k::GemmInputs::BF16).to_vector<float>();
  CHECK(std::isnan(c[0]));  // row 0 holds the NaN
  CHECK(!std::isfinite(c[4]));  // row 1 holds the inf
  CHECK(std::isfinite(c[8]));
}

TEST_CASE("gemm: the path names the bf16 units where the CPU has them, and relpos info prints it",
          "[kernels][gemm][precision]") {
  const std::string f32 = k::cpu_gemm_path(k::GemmInputs::F32), bf16 = k::cpu_gemm_path(k::GemmInputs::BF16);
  INFO("fp32: " << f32 << "\nbf16: " << bf16);
  const bool env = std::getenv("RELPOS_GEMM") != nullptr;
  if (f32.rfind("oneDNN", 0) == 0 && !env) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512bf16"))
      CHECK((bf16.find("avx512_core_bf16") != std::string::npos || bf16.find("amx") != std::string::npos));
    else
      CHECK(bf16.find("no bf16 units") != std::string::npos);
    // The bf16 products run on the AMX pair kernel exactly where the tile products do.
    const bool pairs = k::cpu::tile_isa() == k::cpu::TileIsa::AmxBf16 && __builtin_cpu_supports("avx512bf16");
    CHECK((bf16.rfind("relpos's AMX pair kernel", 0) == 0) == pairs);
#endif
  } else {
    CHECK(bf16.find("on the bf16 values in float32") != std::string::npos);
  }
  const auto info = test::cli_run("info");
  REQUIRE(info.code == 0);
  CHECK(info.out.find("CPU GEMM bf16: " + bf16) != std::string::npos);
  // The override is read from the environment, and a wrong value is named.
  const auto forced = test::shell_run("RELPOS_GEMM=openblas " + test::shell_quote(RELPOS_CLI_PATH) + " info");
  CHECK(forced.code == 0);
  CHECK(forced.out.find("CPU GEMM fp32: OpenBLAS sgemm") != std::string::npos);
  const auto bad = test::shell_run("RELPOS_GEMM=mkl " + test::shell_quote(RELPOS_CLI_PATH) + " info");
  CHECK(bad.code != 0);
  CHECK(bad.out.find("RELPOS_GEMM=mkl: expected 'openblas' or 'onednn'") != std::string::npos);
  // A bf16 run's log names the same path.
  const std::string dir = (std::filesystem::temp_directory_path() / "relpos_gemm_log").string();
  const auto run = test::cli_run("train configs/quickstart.yaml --set train.precision=bf16 --set train.steps=2 "
                                 "--set optim.warmup=0 --set train.eval_every=2 --set output.dir=" +
                                 test::shell_quote(dir));
  std::filesystem::remove_all(dir);
  CHECK(run.code == 0);
  CHECK(run.out.find("precision: bf16 (CPU GEMM: " + bf16 + "; CPU attention tiles: " + k::cpu_attention_tile_path() +
                     ")") != std::string::npos);
}

TEST_CASE("gemm: RELPOS_GEMM_PROFILE=1 prints every GEMM of a run as one table at exit", "[kernels][gemm][profile]") {
  const auto run = quickstart_two_steps("RELPOS_GEMM_PROFILE=1 ", "relpos_gemm_profile");
  REQUIRE(run.code == 0);
  INFO(run.out);
  const auto head = run.out.find("relpos GEMM profile (RELPOS_GEMM_PROFILE=1, ");
  REQUIRE(head != std::string::npos);
  long long calls = 0;
  double gflop = 0;
  {
    const std::string line = run.out.substr(head, run.out.find('\n', head) - head);
    const auto c = line.find("): ");
    REQUIRE(c != std::string::npos);
    REQUIRE(std::sscanf(line.c_str() + c + 3, "%lld calls, %*f ms, %lf GFLOP", &calls, &gflop) == 2);
  }
  // Every row: | inputs | op(A) op(B) | M | N | K | epilogue | calls | ms | ms/call | GFLOP/s |. The
  // rows' calls and 2 M N K add up to the header's; fc1's GEMM carries the GELU and its derivative.
  std::istringstream rows(run.out.substr(head));
  std::string line;
  long long row_calls = 0;
  double row_flop = 0;
  bool fc1 = false;
  while (std::getline(rows, line)) {
    char inputs[16], op[8], epi[32];
    long long m, n, kk, c;
    if (std::sscanf(line.c_str(), "| %15s | %7s | %lld | %lld | %lld | %31s | %lld |", inputs, op, &m, &n, &kk, epi,
                    &c) != 7)
      continue;
    row_calls += c;
    row_flop += 2.0 * double(m) * double(n) * double(kk) * double(c);
    fc1 = fc1 || std::string(epi) == "bias+act+grad";
    CHECK(std::string(inputs) == "f32");
  }
  CHECK(calls > 0);
  CHECK(row_calls == calls);
  CHECK(std::abs(row_flop * 1e-9 - gflop) < 0.006);
  CHECK(fc1);
  // Off by default; any value but 0 or 1 is named.
  const auto off = quickstart_two_steps("", "relpos_gemm_profile");
  CHECK(off.code == 0);
  CHECK(off.out.find("GEMM profile") == std::string::npos);
  const auto bad = test::shell_run("RELPOS_GEMM_PROFILE=yes " + test::shell_quote(RELPOS_CLI_PATH) + " info");
  CHECK(bad.code != 0);
  CHECK(bad.out.find("RELPOS_GEMM_PROFILE=yes: expected '0' or '1'") != std::string::npos);
}

TEST_CASE("ops: RELPOS_OP_PROFILE=1 prints every op of a run as one table at exit, with the time outside ops",
          "[kernels][profile]") {
  const auto run = quickstart_two_steps("RELPOS_OP_PROFILE=1 ", "relpos_op_profile");
  REQUIRE(run.code == 0);
  INFO(run.out);
  const auto head = run.out.find("relpos op profile (RELPOS_OP_PROFILE=1): ");
  REQUIRE(head != std::string::npos);
  long long calls = 0;
  double in_ops = 0, span = 0, outside = 0;
  REQUIRE(std::sscanf(run.out.c_str() + head + std::strlen("relpos op profile (RELPOS_OP_PROFILE=1): "),
                      "%lld calls, %lf ms in ops of the %lf ms from the first op to the last (%lf%% outside ops)",
                      &calls, &in_ops, &span, &outside) == 4);
  // Every row: | op | dtype | calls | ms | ms/call | share |, an op of the table; the rows add up
  // to the header (each rounded to 0.01 ms), and one thread's ops fit in the span they lie in.
  std::istringstream rows(run.out.substr(head));
  std::string line;
  long long row_calls = 0;
  double row_ms = 0;
  int n_rows = 0;
  bool fc1 = false, adam = false, unknown = false;
  while (std::getline(rows, line)) {
    char op[64], dtype[16];
    long long c;
    double ms;
    if (std::sscanf(line.c_str(), "| %63s | %15s | %lld | %lf |", op, dtype, &c, &ms) != 4) continue;
    ++n_rows;
    row_calls += c, row_ms += ms;
    const std::string name(op);
    unknown = unknown || std::find(k::op_names.begin(), k::op_names.end(), name) == k::op_names.end();
    fc1 = fc1 || name == "matmul_act";
    adam = adam || name == "adam_update";
  }
  CHECK(n_rows > 5);
  CHECK_FALSE(unknown);
  CHECK(calls > 0);
  CHECK(row_calls == calls);
  CHECK(std::abs(row_ms - in_ops) <= 0.01 * n_rows);
  CHECK(in_ops > 0);
  CHECK(in_ops <= span + 0.1);
  CHECK(outside >= 0);
  CHECK(fc1);
  CHECK(adam);
  // Off by default; relpos info says which; any value but 0 or 1 is named.
  const auto off = quickstart_two_steps("", "relpos_op_profile");
  CHECK(off.code == 0);
  CHECK(off.out.find("op profile") == std::string::npos);
  CHECK(test::cli_run("info").out.find("op profile:   off") != std::string::npos);
  CHECK(test::shell_run("RELPOS_OP_PROFILE=1 " + test::shell_quote(RELPOS_CLI_PATH) + " info")
            .out.find("op profile:   on") != std::string::npos);
  const auto bad = test::shell_run("RELPOS_OP_PROFILE=yes " + test::shell_quote(RELPOS_CLI_PATH) + " info");
  CHECK(bad.code != 0);
  CHECK(bad.out.find("RELPOS_OP_PROFILE=yes: expected '0' or '1'") != std::string::npos);
}

#ifdef RELPOS_BENCH_TRAIN_PATH
TEST_CASE("profiles: relpos_bench_train's op and GEMM tables cover its timed steps, not the warmup",
          "[kernels][profile]") {
  // k::restart_profiles after the warmup: 2 warmup steps and 2 timed steps record twice the calls
  // of 2 warmup steps and 1 timed step (the steps after the first are alike); without the restart
  // the tables would count 4 and 3 steps.
  const auto calls = [](int64_t steps) {
    const auto run = test::shell_run("RELPOS_OP_PROFILE=1 RELPOS_GEMM_PROFILE=1 OMP_NUM_THREADS=1 " +
                                     test::shell_quote(RELPOS_BENCH_TRAIN_PATH) +
                                     " --d-model 32 --layers 1 --heads 2 --seq 16 --batch 2 --threads 1 --warmup 2"
                                     " --steps " +
                                     std::to_string(steps));
    INFO(run.out);
    REQUIRE(run.code == 0);
    const char* op_head = "relpos op profile (RELPOS_OP_PROFILE=1): ";
    const char* gemm_head = "relpos GEMM profile (RELPOS_GEMM_PROFILE=1, 1 OpenMP threads): ";
    const auto o = run.out.find(op_head), g = run.out.find(gemm_head);
    REQUIRE(o != std::string::npos);
    REQUIRE(g != std::string::npos);
    long long ops = 0, gemms = 0;
    REQUIRE(std::sscanf(run.out.c_str() + o + std::strlen(op_head), "%lld calls", &ops) == 1);
    REQUIRE(std::sscanf(run.out.c_str() + g + std::strlen(gemm_head), "%lld calls", &gemms) == 1);
    return std::pair{ops, gemms};
  };
  const auto [ops1, gemms1] = calls(1);
  const auto [ops2, gemms2] = calls(2);
  CHECK(ops1 > 0);
  CHECK(gemms1 > 0);
  CHECK(ops2 == 2 * ops1);
  CHECK(gemms2 == 2 * gemms1);
}
#endif

TEST_CASE("gemm: two threads multiplying at once get the serial results, bit for bit (sweep --jobs)",
          "[kernels][gemm][threads]") {
  // A sweep with --jobs N trains N points on N threads of one process: GEMM state (cached
  // primitives, scratch memory) created on one thread is used on another.
  struct Job {
    Tensor a, b;
    k::GemmInputs in;
    std::vector<float> want;
  };
  std::vector<Job> jobs;
  uint64_t seed = 100;
  for (auto [M, K, N, ta] : {std::tuple{256, 64, 192, false},
                             {64, 2048, 256, true},
                             {512, 256, 1024, false},
                             {128, 1500, 96, true},
                             {1024, 128, 128, false}})
    for (k::GemmInputs in : {k::GemmInputs::F32, k::GemmInputs::BF16}) {
      const bool bf16 = in == k::GemmInputs::BF16;
      Job j{operand({M, K}, ta, seed, bf16), operand({K, N}, false, seed + 1, bf16), in, {}};
      seed += 2;
      j.want = k::matmul(j.a, j.b, in).to_vector<float>();  // serial, on this thread
      jobs.push_back(std::move(j));
    }
  std::atomic<int> wrong{0};
  auto worker = [&](int offset) {
    for (int rep = 0; rep < 6; ++rep)
      for (size_t i = 0; i < jobs.size(); ++i) {
        const Job& j = jobs[(i + size_t(offset)) % jobs.size()];
        const std::vector<float> got = k::matmul(j.a, j.b, j.in).to_vector<float>();
        if (std::memcmp(got.data(), j.want.data(), got.size() * sizeof(float)) != 0) ++wrong;
      }
  };
  std::thread t1(worker, 0), t2(worker, 3);
  t1.join();
  t2.join();
  CHECK(wrong.load() == 0);
}

TEST_CASE("gemm: 16-bit inputs are rounded by the GEMM itself: unrounded operands give the product of the rounded ones",
          "[kernels][gemm][precision]") {
  // autograd matmul hands the GEMM unrounded operands under autocast (autograd/ops/matmul.cpp);
  // BF16 rounds while packing for the bf16 units, FP16 (and BF16 without them) through rounded
  // float32 copies (kernels/cpu/gemm.cpp round_copy).
  for (auto [in, round] :
       {std::pair{k::GemmInputs::BF16, k::Unary::RoundBF16}, std::pair{k::GemmInputs::FP16, k::Unary::RoundFP16}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Tensor a = operand({48, 200}, ta, 31, false), b = operand({200, 40}, tb, 32, false);
        Tensor ra = k::unary(round, a.contiguous()), rb = k::unary(round, b.contiguous());
        INFO((in == k::GemmInputs::BF16 ? "bf16" : "fp16") << " ta=" << ta << " tb=" << tb);
        check_close(k::matmul(a, b, in), ra, rb, "rounded by the GEMM");
        // and not the unrounded product: the rounding did happen
        CHECK(!bitwise_equal(k::matmul(a, b, in), k::matmul(a, b)));
      }
}

TEST_CASE("gemm: bf16 operands with subnormal values multiply as if those were zero, in every layout",
          "[kernels][gemm][precision]") {
  // The bf16 units (vdpbf16ps, AMX) read subnormal inputs as zero, so the packing may convert them
  // to zero (kernels/cpu/gemm.cpp bf16_row_native); without bf16 units their float32 products are
  // far below half an ulp of each output's sum. Either way the product equals that of the operand
  // with those values zeroed. Rows of 37: the packing's 16-wide tail at every layout.
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Tensor a = operand({24, 37}, ta, 51, false), b = operand({37, 29}, tb, 52, false);
      std::vector<float> av = a.contiguous().to_vector<float>(), zeroed = av;
      for (size_t i = 0; i < av.size(); i += 3) {
        av[i] = (i % 2 ? 1.0f : -1.0f) * 3e-39f * float(1 + i % 5);  // subnormal
        zeroed[i] = 0.0f;
      }
      Tensor as = Tensor::from_vector(av, {24, 37}), az = Tensor::from_vector(zeroed, {24, 37});
      if (ta)
        as = as.transpose(0, 1).contiguous().transpose(0, 1), az = az.transpose(0, 1).contiguous().transpose(0, 1);
      INFO("ta=" << ta << " tb=" << tb);
      CHECK(bitwise_equal(k::matmul(as, b, k::GemmInputs::BF16), k::matmul(az, b, k::GemmInputs::BF16)));
      CHECK(bitwise_equal(k::matmul(b.transpose(0, 1), as.transpose(0, 1), k::GemmInputs::BF16),
                          k::matmul(b.transpose(0, 1), az.transpose(0, 1), k::GemmInputs::BF16)));
    }
}

TEST_CASE(
    "gemm: round_output gives 16-bit values, those of rounding the float32 product, block by block in every "
    "layout",
    "[kernels][gemm][precision]") {
  // N = 2048: blocks of 1 MiB / (4 N) = 128 rows, so M = 300 is three blocks (128, 128, 44); the
  // block offsets differ for a transposed A (columns of the stored matrix).
  for (auto [in, round] :
       {std::pair{k::GemmInputs::BF16, k::Unary::RoundBF16}, std::pair{k::GemmInputs::FP16, k::Unary::RoundFP16}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Tensor a = operand({300, 64}, ta, 41, false), b = operand({64, 2048}, tb, 42, false);
        INFO((in == k::GemmInputs::BF16 ? "bf16" : "fp16") << " ta=" << ta << " tb=" << tb);
        const Tensor c = k::matmul(a, b, in, true);
        CHECK(bitwise_equal(k::unary(round, c), c));  // every value already a 16-bit one
        // Against rounding the unrounded-output product: equal, or (should the library block
        // the rows differently) one 16-bit step apart at most.
        const std::vector<float> got = c.to_vector<float>(),
                                 want = k::unary(round, k::matmul(a, b, in)).to_vector<float>();
        const double step = in == k::GemmInputs::BF16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10);
        size_t equal = 0, worst_i = 0;
        double worst = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          equal += got[i] == want[i];
          const double e = std::abs(double(got[i]) - want[i]) / (step * std::abs(double(want[i])) + 1e-30);
          if (e > worst) worst = e, worst_i = i;
        }
        INFO("equal " << equal << " of " << got.size() << "; worst at " << worst_i << ": " << got[worst_i] << " vs "
                      << want[worst_i]);
        CHECK(worst <= 1.0);
        CHECK(equal >= got.size() * 99 / 100);
        // Without round_output the product is not rounded (the flag is what rounds).
        CHECK(!bitwise_equal(k::matmul(a, b, in), c));
        // float32 inputs ignore the flag.
        CHECK(bitwise_equal(k::matmul(a, b, k::GemmInputs::F32, true), k::matmul(a, b)));
      }
}

TEST_CASE("gemm: the bias epilogue adds the bias to every row of every block, after the 16-bit rounding",
          "[kernels][gemm][precision]") {
  // N = 2048: with a bias the rows of a float32 product go in blocks of 128 (1 MiB / (4 N)), so
  // M = 300 is three blocks, and those of a bf16 product on bf16 units in blocks of 2048
  // (16 MiB / (4 N)), so M = 2100 is two; a bias missing from any block, or added before the
  // rounding, shows here.
  Generator gb(43);
  const Tensor bias = Tensor::randn({2048}, gb);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO("ta=" << ta << " tb=" << tb);
      Tensor a = operand({300, 64}, ta, 44, false), b = operand({64, 2048}, tb, 45, false);
      // float32: the float64 product plus the bias, within the product's bound and the add's
      // rounding.
      const std::vector<float> got = k::matmul(a, b, k::GemmInputs::F32, false, bias).to_vector<float>();
      const std::vector<double> ref = reference(a, b);
      const std::vector<double> mag = reference(k::unary(k::Unary::Abs, a), k::unary(k::Unary::Abs, b));
      const std::vector<float> bv = bias.to_vector<float>();
      const double u = std::ldexp(1.0, -24);
      double worst = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        const double want = ref[i] + bv[i % 2048];
        const double bound = 2 * 64 * u * mag[i] + 2 * u * (std::abs(want) + std::abs(bv[i % 2048])) + 1e-30;
        worst = std::max(worst, std::abs(double(got[i]) - want) / bound);
      }
      CHECK(worst <= 1.0);
      // The same bits as the product and a separate add (oneDNN adds this bias in its kernel).
      CHECK(bitwise_equal(k::matmul(a, b, k::GemmInputs::F32, false, bias), k::add(k::matmul(a, b), bias)));
      // 16-bit: the rounded product, then the bias, bit for bit (the same blocks either way).
      for (auto in : {k::GemmInputs::BF16, k::GemmInputs::FP16}) {
        const Tensor c = k::matmul(a, b, in, true, bias);
        CHECK(bitwise_equal(c, k::add(k::matmul(a, b, in, true), bias)));
        CHECK(!bitwise_equal(c, k::matmul(a, b, in, true)));
      }
    }
  {  // bf16 in two blocks (2048 + 52 rows where the CPU multiplies bf16 natively)
    Tensor a = operand({2100, 64}, false, 51, false), b = operand({64, 2048}, true, 52, false);
    const Tensor c = k::matmul(a, b, k::GemmInputs::BF16, true, bias);
    CHECK(bitwise_equal(c, k::add(k::matmul(a, b, k::GemmInputs::BF16, true), bias)));
    const k::MatmulActOut out = k::matmul_act(a, b, k::GemmInputs::BF16, true, bias, k::Unary::GeluErf, true);
    CHECK(bitwise_equal(out.y, k::unary(k::Unary::GeluErf, c)));
    CHECK(bitwise_equal(out.act_grad, k::unary(k::Unary::GeluErfGrad, c)));
  }
  // Batched operands (one GEMM per batch, the bias in each) and float64.
  Generator g(46);
  const Tensor a3 = Tensor::randn({3, 5, 7}, g), b3 = Tensor::randn({3, 7, 4}, g), bias4 = Tensor::randn({4}, g);
  CHECK(bitwise_equal(k::matmul(a3, b3, k::GemmInputs::F32, false, bias4), k::add(k::matmul(a3, b3), bias4)));
  const Tensor a64 = a3.to(DType::F64), b64 = b3.to(DType::F64), bias64 = bias4.to(DType::F64);
  CHECK(k::matmul(a64, b64, k::GemmInputs::F32, false, bias64).to_vector<double>() ==
        k::add(k::matmul(a64, b64), bias64).to_vector<double>());
  // K = 0: the bias alone; a bias of the wrong length is refused with its shape named.
  const Tensor e = k::matmul(Tensor::zeros({2, 0}), Tensor::zeros({0, 4}), k::GemmInputs::F32, false, bias4);
  CHECK(bitwise_equal(e, k::add(Tensor::zeros({2, 4}), bias4)));
  CHECK_THROWS_WITH(k::matmul(a3, b3, k::GemmInputs::F32, false, Tensor::zeros({5})),
                    Catch::Contains("bias must be [4]") && Catch::Contains("[5]"));
}

TEST_CASE("gemm: the multiplier epilogue (matmul_mul) is k::mul of the product in every block, after the rounding",
          "[kernels][gemm][precision]") {
  // N = 2048: float32 blocks of 128 rows, so M = 300 is three (each thread multiplying whole
  // blocks); bf16 on bf16 units one 16 MiB block. A multiplier missing from a block, applied
  // before the rounding or to the wrong rows shows here.
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO("ta=" << ta << " tb=" << tb);
      const Tensor a = operand({300, 64}, ta, 61, false), b = operand({64, 2048}, tb, 62, false);
      Generator gm(63);
      const Tensor m = Tensor::randn({300, 2048}, gm);
      CHECK(bitwise_equal(k::matmul_mul(a, b, k::GemmInputs::F32, false, m), k::mul(k::matmul(a, b), m)));
      for (auto in : {k::GemmInputs::BF16, k::GemmInputs::FP16})
        CHECK(bitwise_equal(k::matmul_mul(a, b, in, true, m), k::mul(k::matmul(a, b, in, true), m)));
    }
  // float64, a transposed multiplier, and shapes refused with both named.
  Generator g(64);
  const Tensor a = Tensor::randn({5, 7}, g, DType::F64), b = Tensor::randn({7, 4}, g, DType::F64);
  const Tensor mt = Tensor::randn({4, 5}, g, DType::F64).transpose(0, 1);
  CHECK(k::matmul_mul(a, b, k::GemmInputs::F32, false, mt).to_vector<double>() ==
        k::mul(k::matmul(a, b), mt).to_vector<double>());
  CHECK_THROWS_WITH(k::matmul_mul(a, b, k::GemmInputs::F32, false, Tensor::zeros({5, 5}, DType::F64)),
                    Catch::Contains("multiplier must be [5, 4]") && Catch::Contains("[5, 5]"));
}

TEST_CASE("gemm: the addend epilogue (matmul_add) is k::add of the biased product in every block, after the rounding",
          "[kernels][gemm][precision]") {
  // A residual around a linear layer. M = 300 x N = 2048: float32 blocks of 128 rows, each thread
  // taking whole blocks (the path of the activation and the multiplier); N = 256 with K = 64 and
  // K = 1024: the shapes of the small model's output projection and fc2. An addend missing from a
  // block, added before the rounding or the bias, or to the wrong rows shows here.
  for (const auto& [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{300, 2048, 64}, {300, 256, 64}, {130, 256, 1024}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        INFO("M=" << M << " N=" << N << " K=" << K << " ta=" << ta << " tb=" << tb);
        const Tensor a = operand({M, K}, ta, 71, false), b = operand({K, N}, tb, 72, false);
        Generator gr(73);
        const Tensor r = Tensor::randn({M, N}, gr), bias = Tensor::randn({N}, gr);
        for (const Tensor& bi : {bias, Tensor()}) {
          CHECK(bitwise_equal(k::matmul_add(a, b, k::GemmInputs::F32, false, bi, r),
                              k::add(k::matmul(a, b, k::GemmInputs::F32, false, bi), r)));
          for (auto in : {k::GemmInputs::BF16, k::GemmInputs::FP16})
            CHECK(bitwise_equal(k::matmul_add(a, b, in, true, bi, r), k::add(k::matmul(a, b, in, true, bi), r)));
        }
      }
  // A batched product with a strided addend, float64, K = 0, and shapes refused with both named.
  Generator g(74);
  const Tensor a = Tensor::randn({2, 5, 7}, g), b = Tensor::randn({7, 4}, g), bias = Tensor::randn({4}, g);
  const Tensor rt = Tensor::randn({2, 4, 5}, g).transpose(1, 2);
  CHECK(bitwise_equal(k::matmul_add(a, b, k::GemmInputs::F32, false, bias, rt),
                      k::add(k::matmul(a, b, k::GemmInputs::F32, false, bias), rt)));
  const Tensor a64 = Tensor::randn({5, 7}, g, DType::F64), b64 = Tensor::randn({7, 4}, g, DType::F64),
               r64 = Tensor::randn({5, 4}, g, DType::F64);
  CHECK(k::matmul_add(a64, b64, k::GemmInputs::F32, false, Tensor(), r64).to_vector<double>() ==
        k::add(k::matmul(a64, b64), r64).to_vector<double>());
  const Tensor r0 = Tensor::randn({3, 4}, g), bias4 = Tensor::randn({4}, g);
  CHECK(bitwise_equal(k::matmul_add(Tensor::zeros({3, 0}), Tensor::zeros({0, 4}), k::GemmInputs::F32, false, bias4, r0),
                      k::add(k::add(Tensor::zeros({3, 4}), bias4), r0)));
  CHECK_THROWS_WITH(k::matmul_add(a64, b64, k::GemmInputs::F32, false, Tensor(), Tensor::zeros({5, 5}, DType::F64)),
                    Catch::Contains("addend must be [5, 4]") && Catch::Contains("[5, 5]"));
}

TEST_CASE("gemm: matmul_sums gives matmul's product and a's sums along K, in every layout, K chunks and precision",
          "[kernels][gemm][precision]") {
  // dW = g^T x with db = the sums of g^T: K = 3000 is three float32 chunks of 1024 and six bf16
  // chunks of 512 (each summed by the thread that multiplies it), K = 300 one. The sums are of a's
  // own values under bf16 / fp16 too (a is not bf16-valued here): a sum of rounded values, a
  // chunk left out or counted twice, or a sum of the wrong rows shows against float64.
  const int before = k::num_threads();
  for (int64_t K : {300, 3000})
    for (bool ta : {true, false})
      for (bool tb : {false, true}) {
        const Tensor a = operand({48, K}, ta, 71, false), b = operand({K, 40}, tb, 72, false);
        const std::vector<double> av = a.contiguous().to_vector<double>();
        std::vector<double> want(48, 0.0), mag(48, 0.0);
        for (int64_t m = 0; m < 48; ++m)
          for (int64_t k = 0; k < K; ++k)
            want[size_t(m)] += av[size_t(m * K + k)], mag[size_t(m)] += std::abs(av[size_t(m * K + k)]);
        for (auto in : {k::GemmInputs::F32, k::GemmInputs::BF16, k::GemmInputs::FP16}) {
          INFO("K=" << K << " ta=" << ta << " tb=" << tb << " inputs " << int(in));
          const bool r16 = in != k::GemmInputs::F32;
          std::vector<k::MatmulSumsOut> outs;
          for (int threads : {1, 2, 3}) {
            k::set_num_threads(threads);
            outs.push_back(k::matmul_sums(a, b, in, r16));
          }
          k::set_num_threads(before);
          CHECK(bitwise_equal(outs[0].y, k::matmul(a, b, in, r16)));
          REQUIRE(outs[0].a_sums.shape() == Shape{48});
          const std::vector<float> got = outs[0].a_sums.to_vector<float>();
          for (size_t m = 0; m < 48; ++m) CHECK(std::abs(got[m] - want[m]) <= 1e-7 * mag[m] + 1e-30);
          for (size_t i = 1; i < outs.size(); ++i) {
            CHECK(bitwise_equal(outs[0].y, outs[i].y));
            CHECK(bitwise_equal(outs[0].a_sums, outs[i].a_sums));
          }
        }
      }
  // float64; the empty products; a batched operand is refused with its shape named.
  Generator g(73);
  const Tensor a = Tensor::randn({5, 7}, g, DType::F64), b = Tensor::randn({7, 4}, g, DType::F64);
  const k::MatmulSumsOut o = k::matmul_sums(a, b, k::GemmInputs::F32, false);
  CHECK(o.y.to_vector<double>() == k::matmul(a, b).to_vector<double>());
  CHECK_THAT(o.a_sums.to_vector<double>(),
             Catch::Approx(k::reduce(k::Reduce::Sum, a, {1}, false, 0).to_vector<double>()).epsilon(1e-15));
  CHECK(k::matmul_sums(Tensor::zeros({3, 0}), Tensor::zeros({0, 4}), k::GemmInputs::F32, false)
            .a_sums.to_vector<float>() == std::vector<float>(3, 0.0f));
  const Tensor a35 = Tensor::randn({3, 5}, g);
  const k::MatmulSumsOut n0 = k::matmul_sums(a35, Tensor::zeros({5, 0}), k::GemmInputs::F32, false);
  CHECK(n0.y.shape() == Shape{3, 0});
  CHECK(bitwise_equal(n0.a_sums, k::reduce(k::Reduce::Sum, a35, {1}, false, 0)));
  CHECK_THROWS_WITH(k::matmul_sums(Tensor::zeros({2, 3, 4}), Tensor::zeros({4, 5}), k::GemmInputs::F32, false),
                    Catch::Contains("matmul_sums") && Catch::Contains("[2, 3, 4]"));
}

TEST_CASE("gemm: the activation epilogue gives k::unary's values and derivatives in every block, after the bias",
          "[kernels][gemm][precision]") {
  // N = 2048: the rows go in blocks of 128, so M = 300 is three blocks; an activation or a
  // derivative missing from a block, applied before the bias or the rounding, or a derivative
  // taken of the activated value, shows as a bit difference.
  Generator gb(47);
  const Tensor bias = Tensor::randn({2048}, gb);
  const Tensor a = operand({300, 64}, false, 48, false), b = operand({64, 2048}, true, 49, false);
  for (k::Unary act : {k::Unary::GeluErf, k::Unary::GeluTanh, k::Unary::Relu, k::Unary::Silu})
    for (auto in : {k::GemmInputs::F32, k::GemmInputs::BF16, k::GemmInputs::FP16})
      for (bool with_bias : {true, false}) {
        INFO("act=" << int(act) << " inputs=" << int(in) << " bias=" << with_bias);
        const Tensor bb = with_bias ? bias : Tensor();
        const bool r16 = in != k::GemmInputs::F32;
        const Tensor pre = k::matmul(a, b, in, r16, bb);
        const k::MatmulActOut out = k::matmul_act(a, b, in, r16, bb, act, true);
        CHECK(bitwise_equal(out.y, k::unary(act, pre)));
        CHECK(bitwise_equal(out.act_grad, k::unary(k::derivative_of(act), pre)));
        // Without want_grad: the same values and no derivative.
        const k::MatmulActOut fwd = k::matmul_act(a, b, in, r16, bb, act, false);
        CHECK(bitwise_equal(fwd.y, out.y));
        CHECK(!fwd.act_grad.defined());
      }
  // Batched (one GEMM per batch, each with its slice of the derivative), float64, K = 0.
  Generator g(50);
  const Tensor a3 = Tensor::randn({3, 5, 7}, g), b3 = Tensor::randn({3, 7, 4}, g), bias4 = Tensor::randn({4}, g);
  const k::MatmulActOut o3 = k::matmul_act(a3, b3, k::GemmInputs::F32, false, bias4, k::Unary::GeluErf, true);
  const Tensor pre3 = k::matmul(a3, b3, k::GemmInputs::F32, false, bias4);
  CHECK(bitwise_equal(o3.y, k::unary(k::Unary::GeluErf, pre3)));
  CHECK(bitwise_equal(o3.act_grad, k::unary(k::Unary::GeluErfGrad, pre3)));
  const Tensor a64 = a3.to(DType::F64), b64 = b3.to(DType::F64), bias64 = bias4.to(DType::F64);
  const k::MatmulActOut o64 = k::matmul_act(a64, b64, k::GemmInputs::F32, false, bias64, k::Unary::Silu, true);
  const Tensor pre64 = k::matmul(a64, b64, k::GemmInputs::F32, false, bias64);
  CHECK(o64.y.to_vector<double>() == k::unary(k::Unary::Silu, pre64).to_vector<double>());
  CHECK(o64.act_grad.to_vector<double>() == k::unary(k::Unary::SiluGrad, pre64).to_vector<double>());
  const k::MatmulActOut e = k::matmul_act(Tensor::zeros({2, 0}), Tensor::zeros({0, 4}), k::GemmInputs::F32, false,
                                          bias4, k::Unary::GeluErf, true);
  const Tensor ebias = k::add(Tensor::zeros({2, 4}), bias4);
  CHECK(bitwise_equal(e.y, k::unary(k::Unary::GeluErf, ebias)));
  CHECK(bitwise_equal(e.act_grad, k::unary(k::Unary::GeluErfGrad, ebias)));
  // Not an activation: refused, naming the op.
  CHECK_THROWS_WITH(k::matmul_act(a3, b3, k::GemmInputs::F32, false, bias4, k::Unary::Exp, true),
                    Catch::Contains("matmul_act") && Catch::Contains("not an activation"));
}
