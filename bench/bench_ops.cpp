// bench/bench_ops.cpp — time relpos k::matmul (float32, and bf16 operands), the fused attention (float32 and bf16)
// (forward + backward) and k::softmax.
// bench/torch_ops.py runs the same cases the same way with PyTorch; bench/run_ops_bench.sh
// runs both with one thread count and prints a comparison table.
//
// Method (identical in torch_ops.py): warmup calls for at least 250 ms (and at least 3
// calls); one timed call gives `inner`, the number of calls per sample needed for a sample
// of >= 2 ms (at most 1000); then 15 samples, each the mean time of `inner` back-to-back
// calls; the median sample is reported. The warmup is long so that a case does not time
// the previous case's idle threads: on a 2-core machine an OpenMP-parallel op run within
// ~0.1 s after a multi-threaded OpenBLAS GEMM (whose pthread workers busy-wait meanwhile)
// stalls to ~8 ms per call, and the first calls after an idle spell can run at one-thread
// speed (measurements in bench/RESULTS.md).
//
// Usage: relpos_bench_ops [--threads N] [--filter SUBSTRING]
//   N defaults to OMP_NUM_THREADS, else 1; --filter keeps cases whose "op size" contains it.
// Output: one JSON object per line, first a "meta" line, then one per case:
//   {"impl":"relpos","op":"matmul","size":"256x256x256","threads":1,"ms":0.41,"gflops":81.3,...}
#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "core/tensor.h"
#include "kernels/ops.h"

using namespace relpos;

namespace {

constexpr int kWarmup = 3;          // at least this many warmup calls
constexpr double kWarmupMs = 250.0;  // and at least this long
constexpr int kSamples = 15;
constexpr double kMinSampleMs = 2.0;
constexpr int kMaxInner = 1000;

double now_ms() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

// Median over kSamples of the mean time of `inner` calls of fn, in ms.
double time_op(const std::function<Tensor()>& fn, int& inner_out) {
  double t0 = now_ms();
  for (int i = 0; i < kWarmup || now_ms() - t0 < kWarmupMs; ++i) fn();
  t0 = now_ms();
  fn();
  double one = std::max(now_ms() - t0, 1e-6);
  int inner = std::clamp(int(std::ceil(kMinSampleMs / one)), 1, kMaxInner);
  std::vector<double> samples;
  for (int s = 0; s < kSamples; ++s) {
    t0 = now_ms();
    for (int i = 0; i < inner; ++i) fn();
    samples.push_back((now_ms() - t0) / inner);
  }
  std::sort(samples.begin(), samples.end());
  inner_out = inner;
  return samples[samples.size() / 2];
}

struct Case {
  std::string op, size;
  double flops;  // 0 for memory-bound ops
  double bytes;  // bytes read + written once
  std::function<Tensor()> fn;
};

// The command line: --threads N (default OMP_NUM_THREADS or 1), --filter SUBSTRING (only cases
// whose "op size" contains it). Exits 2 on anything else.
struct Options {
  int threads = 1;
  std::string filter;
};

Options parse_options(int argc, char** argv) {
  Options o;
  if (const char* e = std::getenv("OMP_NUM_THREADS")) o.threads = std::max(1, std::atoi(e));
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      o.threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--filter") == 0 && i + 1 < argc) {
      o.filter = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--filter SUBSTRING]\n", argv[0]);
      std::exit(2);
    }
  }
  return o;
}

Tensor randn(Generator& gen, const Shape& s) { return Tensor::randn(s, gen, DType::F32); }

// The GEMM cases: square, batched, transposed views, the models' products (float32 and bf16)
// and fc1 with its epilogue.
void add_matmul_cases(Generator& gen, std::vector<Case>& cases) {
  auto randn = [&](const Shape& s) { return ::randn(gen, s); };
  auto add_mm = [&](int64_t M, int64_t K, int64_t N) {
    Tensor a = randn({M, K}), b = randn({K, N});
    cases.push_back({"matmul", std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N),
                     2.0 * M * N * K, 4.0 * (M * K + K * N + M * N), [a, b] { return k::matmul(a, b); }});
  };
  for (int64_t n : {128, 256, 512, 1024}) add_mm(n, n, n);
  {  // batched: [16,128,64] @ [16,64,128]
    Tensor a = randn({16, 128, 64}), b = randn({16, 64, 128});
    cases.push_back({"matmul", "16x[128x64x128]", 2.0 * 16 * 128 * 128 * 64,
                     4.0 * 16 * (128 * 64 + 64 * 128 + 128 * 128), [a, b] { return k::matmul(a, b); }});
  }
  {  // transposed operands: views made with .transpose(0, 1), never copied
    const int64_t n = 512;
    Tensor at = randn({n, n}).transpose(0, 1), b = randn({n, n});
    cases.push_back({"matmul", "512x512x512 a.T", 2.0 * n * n * n, 4.0 * 3 * n * n,
                     [at, b] { return k::matmul(at, b); }});
    Tensor a = randn({n, n}), bt = randn({n, n}).transpose(0, 1);
    cases.push_back({"matmul", "512x512x512 b.T", 2.0 * n * n * n, 4.0 * 3 * n * n,
                     [a, bt] { return k::matmul(a, bt); }});
  }
  // The small model's GEMMs (B*T = 2048 rows, d 256, d_ff 1024): q/k/v, fc1, fc2 and a weight
  // gradient (x^T dy, K = B*T), then the tiny model's (d 128, d_ff 512: a q/k/v or output
  // projection, fc1, fc2, fc1's weight gradient), in float32 and with bf16 operands
  // ("matmul_bf16": float32 tensors holding bf16 values, k::GemmInputs::BF16, the packing to bf16
  // included; PyTorch: torch.matmul on bfloat16 tensors).
  for (auto [M, K, N, ta] : {std::tuple{2048, 256, 768, false},
                             {2048, 256, 1024, false},
                             {2048, 1024, 256, false},
                             {256, 2048, 1024, true},
                             {2048, 128, 128, false},
                             {2048, 128, 512, false},
                             {2048, 512, 128, false},
                             {512, 2048, 128, true}}) {
    const std::string size = std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N) + (ta ? " a.T" : "");
    Tensor a = ta ? randn({K, M}).transpose(0, 1) : randn({M, K}), b = randn({K, N});
    cases.push_back(
        {"matmul", size, 2.0 * M * N * K, 4.0 * (M * K + K * N + M * N), [a, b] { return k::matmul(a, b); }});
    Tensor ab = k::unary(k::Unary::RoundBF16, a), bb = k::unary(k::Unary::RoundBF16, b);
    cases.push_back({"matmul_bf16", size, 2.0 * M * N * K, 2.0 * (M * K + K * N) + 4.0 * M * N,
                     [ab, bb] { return k::matmul(ab, bb, k::GemmInputs::BF16); }});
  }
  // fc1 with its epilogue (k::matmul_act: bias, erf-GELU and GELU' saved for the backward) at the
  // small and tiny models' shapes, float32 and bf16 operands: against "matmul" of the same size,
  // what the epilogue costs. (No PyTorch case: its forward does not compute GELU'.)
  for (auto [M, K, N] : {std::array<int64_t, 3>{2048, 256, 1024}, {2048, 128, 512}}) {
    const std::string size = std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N);
    Tensor a = k::unary(k::Unary::RoundBF16, randn({M, K})), b = k::unary(k::Unary::RoundBF16, randn({K, N}));
    Tensor bias = randn({N});
    for (auto inputs : {k::GemmInputs::F32, k::GemmInputs::BF16})
      cases.push_back({inputs == k::GemmInputs::F32 ? "linear_gelu" : "linear_gelu_bf16", size, 2.0 * M * N * K,
                       2.0 * (M * K + K * N) + 8.0 * M * N, [a, b, bias, inputs] {
                         return k::matmul_act(a, b, inputs, false, bias, k::Unary::GeluErf, true).y;
                       }});
  }
}

void add_attention_cases(Generator& gen, std::vector<Case>& cases) {
  auto randn = [&](const Shape& s) { return ::randn(gen, s); };
  // The fused causal attention, forward + backward (q, k, v [B, H, L, dh]; the tiny, small and
  // long models' shapes); flops: the forward's two products 4 B H L^2 dh and the backward's
  // recomputed scores and four products 10 B H L^2 dh, halved by the causal mask. PyTorch:
  // scaled_dot_product_attention(is_causal=True) and torch.autograd.grad.
  // "heads view": q, k, v and the gradient as the model hands them over, [B, L, H, dh] tensors
  // viewed as [B, H, L, dh] (row stride H dh), not dense per head.
  for (auto [B, H, L, dh, view] : {std::tuple<int64_t, int64_t, int64_t, int64_t, bool>{16, 4, 128, 32, false},
                                   {8, 8, 256, 32, false},
                                   {8, 8, 256, 32, true},
                                   {1, 4, 2048, 32, false},
                                   {1, 4, 2048, 32, true}}) {
    auto heads = [&, B = B, H = H, L = L, dh = dh, view = view] {
      return view ? randn({B, L, H, dh}).transpose(1, 2) : randn({B, H, L, dh});
    };
    Tensor q = heads(), kk = heads(), v = heads(), go = heads();
    k::AttentionArgs args;
    args.scale = 1.0 / std::sqrt(double(dh));
    args.causal = true;
    const std::string size = fmt::format("[{},{},{},{}] causal fwd+bwd{}", B, H, L, dh, view ? " heads view" : "");
    cases.push_back({"attention", size, 0.5 * 14.0 * double(B * H * L * L * dh), 4.0 * 8 * double(B * H * L * dh),
                     [q, kk, v, go, args] {
                       const k::AttentionOut f = k::attention(q, kk, v, Tensor(), Tensor(), args);
                       return k::attention_backward(go, q, kk, v, Tensor(), Tensor(), f, args).dq;
                     }});
    // bf16 autocast as the model runs it (k::AttentionArgs::inputs, probs): the operands, P and dS
    // rounded in the kernel, every product on bf16 pairs where the CPU has AVX512-BF16
    // (RELPOS_TILE_GEMM=avx512 for the float32 tiles)
    k::AttentionArgs a16 = args;
    a16.inputs = a16.probs = k::GemmInputs::BF16;
    a16.round_output = true;
    cases.push_back({"attention_bf16", size, 0.5 * 14.0 * double(B * H * L * L * dh), 4.0 * 8 * double(B * H * L * dh),
                     [q, kk, v, go, a16] {
                       const k::AttentionOut f = k::attention(q, kk, v, Tensor(), Tensor(), a16);
                       return k::attention_backward(go, q, kk, v, Tensor(), Tensor(), f, a16).dq;
                     }});
  }
}

void add_softmax_cases(Generator& gen, std::vector<Case>& cases) {
  for (const Shape& s : {Shape{4096, 256}, Shape{64, 4, 128, 128}}) {
    Tensor x = randn(gen, s);
    std::string size = "[";
    for (size_t i = 0; i < s.size(); ++i) {
      if (i) size += ',';
      size += std::to_string(s[i]);
    }
    size += ']';
    cases.push_back({"softmax", size, 0.0, 2.0 * 4.0 * double(x.numel()), [x] { return k::softmax(x, -1); }});
  }

}

// One JSON line describing the run (threads, BLAS, the GEMM paths, the timing rules).
void print_meta(int threads) {
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf(
      "{\"impl\":\"relpos\",\"meta\":true,\"threads\":%d,\"omp_max_threads\":%d,"
      "\"openblas_threads\":%d,\"openblas_config\":\"%s\",\"openblas_coretype_env\":\"%s\","
      "\"warmup\":%d,\"warmup_ms\":%g,\"samples\":%d,\"min_sample_ms\":%g,\"gemm_f32\":\"%s\",\"gemm_bf16\":\"%s\"}\n",
      threads, omp_get_max_threads(), openblas_get_num_threads(), openblas_get_config(), coretype ? coretype : "",
      kWarmup, kWarmupMs, kSamples, kMinSampleMs, k::cpu_gemm_path(k::GemmInputs::F32).c_str(),
      k::cpu_gemm_path(k::GemmInputs::BF16).c_str());
  std::fflush(stdout);
}

void run_cases(const std::vector<Case>& cases, const Options& o) {
  const int threads = o.threads;
  const std::string& filter = o.filter;
  for (const Case& c : cases) {
    if (!filter.empty() && (c.op + " " + c.size).find(filter) == std::string::npos) continue;
    int inner = 0;
    const double ms = time_op(c.fn, inner);
    std::printf("{\"impl\":\"relpos\",\"op\":\"%s\",\"size\":\"%s\",\"threads\":%d,\"ms\":%.6g,", c.op.c_str(),
                c.size.c_str(), threads, ms);
    if (c.flops > 0) std::printf("\"gflops\":%.4g,", c.flops / (ms * 1e6));
    else std::printf("\"gflops\":null,");
    std::printf("\"gbps\":%.4g,\"inner\":%d}\n", c.bytes / (ms * 1e6), inner);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  k::set_num_threads(o.threads);
  Generator gen(1234);
  std::vector<Case> cases;
  add_matmul_cases(gen, cases);
  add_attention_cases(gen, cases);
  add_softmax_cases(gen, cases);
  print_meta(o.threads);
  run_cases(cases, o);
  return 0;
}
