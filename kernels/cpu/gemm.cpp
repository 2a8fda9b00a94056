// kernels/cpu/gemm.cpp — the CPU GEMM provider (kernels/cpu/gemm.h): oneDNN matmul when built
// with it, OpenBLAS otherwise and for float64.
//
// Why oneDNN (bench/RESULTS.md, "GEMM provider"): on the 2-core AMD EPYC (Zen 5) VM, at the
// model's shapes, oneDNN 2.6's AVX-512 brgemm runs 385-477 GFLOP/s against 225-375 for
// OpenBLAS 0.3.21's own AVX-512 pick (Cooperlake kernels) and ~200 with its AVX2 kernels (which
// that VM's environment forces with OPENBLAS_CORETYPE=Haswell); and only oneDNN has bf16
// kernels in Debian (Debian's OpenBLAS build exports no sbgemm).
//
// oneDNN specifics handled here:
//   - one primitive per (dtype, layout, M, N, K, leading dims, bias, threads): creating one
//     costs tens of microseconds, executing a cached one a few; the cache is capped (eval over
//     many lengths) and cleared when full;
//   - K is cut into chunks of at most kMaxK, kMaxKBf16 for bf16 (see gemm.h: no K-parallel
//     reduction, so results do not depend on the thread count); each chunk is multiplied by one
//     thread and the chunks' products are added in order (onednn_product);
//   - it parallelises with OpenMP itself (omp_get_max_threads() at execution); called inside a
//     parallel region it runs on the calling thread;
//   - scratch memory is ours (scratchpad_mode::user, a per-thread buffer): oneDNN's own
//     "global" scratchpad belongs to the thread that created the primitive, and a primitive
//     run on another thread (sweep --jobs trains points on several threads of one process)
//     computed wrong results (tests/kernels/test_gemm.cpp, two threads at once);
//   - bf16 operands are packed from their float32 storage (round to nearest even, exact for the
//     bf16-valued floats autocast produces) into per-thread buffers;
//   - on a CPU with AMX (the tile ISA amxbf16) the bf16 products skip oneDNN: the operands are
//     packed straight into AMX's pair layout and multiplied on relpos's AMX pair kernel
//     (kernels/cpu/tile_gemm.h), by blocks of rows (pairs_rows_product) or, for the weight
//     gradients, by K chunks (onednn_product) — the same instruction order, the same bits.
#include "kernels/cpu/gemm.h"
#include "core/env.h"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/float16.h"
#include "kernels/backend.h"
#include "kernels/cpu/bf16_convert.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/tile_gemm.h"
#include "kernels/cpu/unary_value.h"

#if RELPOS_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace relpos::k {

namespace {

enum class Provider { OpenBLAS, OneDNN };

[[maybe_unused]] Provider requested_provider() {  // (unused without oneDNN)
  static const Provider p = [] {
    const std::string e = env_value("RELPOS_GEMM");  // checked against the table (core/env.cpp)
    if (e.empty()) return RELPOS_WITH_DNNL ? Provider::OneDNN : Provider::OpenBLAS;
    if (e == "openblas") return Provider::OpenBLAS;
    RELPOS_CHECK_CONFIG(RELPOS_WITH_DNNL,
                        "environment RELPOS_GEMM=onednn: this relpos was built without oneDNN (RELPOS_WITH_DNNL=OFF)");
    return Provider::OneDNN;
  }();
  return p;
}

void openblas_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
                    int64_t ldb, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              1.0f, a, int(lda), b, int(ldb), 0.0f, c, int(ldc));
}

// acc[m] = the float64 sum of op(A)[m, 0 .. kc) for m < M, A stored [kc, M] (ta, leading dim
// lda: rows added in order, each a contiguous run of M) or [M, kc] (a row's run summed).
template <typename T>
void sum_a_rows(bool ta, const T* a, int64_t lda, int64_t M, int64_t kc, double* acc) {
  if (ta) {
    std::fill(acc, acc + M, 0.0);
    for (int64_t k = 0; k < kc; ++k) {
      const T* row = a + k * lda;
#pragma omp simd
      for (int64_t m = 0; m < M; ++m) acc[m] += double(row[m]);
    }
    return;
  }
  for (int64_t m = 0; m < M; ++m) {
    const T* row = a + m * lda;
    double s = 0.0;
    for (int64_t k = 0; k < kc; ++k) s += double(row[k]);
    acc[m] = s;
  }
}

#if RELPOS_WITH_DNNL
constexpr int64_t kMaxK = 1024;
// bf16 products take K in chunks of at most kMaxKBf16. oneDNN 2.6's AMX kernels cut K into
// chunks whose size depends on the thread count (its blocking heuristic weighs thread balance
// against the chunk's L2 footprint), sum each chunk from zero and then add it to C: with K of
// 768 to 2048 the bits of a bf16 product changed between 1, 2 and 3 threads (2-core Xeon with
// AMX; 5 x 5 x 4 layouts x 3 thread counts at K = 512: no change). The determinism test in
// tests/kernels/test_gemm.cpp holds shapes of both kinds. 512 rather than 256 (where the
// footprint argument alone rules a further cut out): 256 made K = 1024 products 37% slower,
// 512 makes them 10-15% slower (bench/RESULTS.md).
constexpr int64_t kMaxKBf16 = 512;
constexpr size_t kMaxCached = 4096;

// (bf16, ta, tb, M, N, K, lda, ldb, ldc, bias, threads): a primitive keeps the thread count it
// was created for (its blocking and its parallel loop), so a new count needs a new one.
using Key = std::tuple<bool, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, int>;

struct Primitive {
  dnnl::matmul matmul;
  std::string impl;            // oneDNN's name of the kernel it picked: "brg:avx512_core_bf16"
  dnnl::memory::desc scratch;  // the scratch memory an execution needs (user scratchpad)
};

struct OneDnn {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  bool bf16_units = false;  // AVX512-BF16 or AMX-BF16: oneDNN multiplies bf16 natively
  std::mutex mu;
  std::map<Key, Primitive> cache;
  OneDnn() {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto want = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    bf16_units = (isa & want) == want;
  }
};

OneDnn& onednn() {
  static OneDnn d;
  return d;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(onednn().engine);
  return s;
}

// This thread's scratch memory for one execution, at least `bytes`, 64-byte aligned.
void* thread_scratch(size_t bytes) {
  thread_local cpu::Scratch<unsigned char> buf;
  return buf.get(bytes);
}

// [rows, cols] with leading dim ld, stored transposed when `trans`.
dnnl::memory::desc matrix_desc(bool bf16, bool trans, int64_t rows, int64_t cols, int64_t ld) {
  using dt = dnnl::memory::data_type;
  return dnnl::memory::desc({rows, cols}, bf16 ? dt::bf16 : dt::f32,
                            trans ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1});
}

// The primitive for one (chunk) shape; created once, then taken from the cache.
Primitive primitive(const Key& key) {
  OneDnn& d = onednn();
  {
    std::lock_guard lock(d.mu);
    auto it = d.cache.find(key);
    if (it != d.cache.end()) return it->second;
  }
  const auto [bf16, ta, tb, M, N, K, lda, ldb, ldc, bias, threads] = key;
  (void)threads;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto a = matrix_desc(bf16, ta, M, K, lda), b = matrix_desc(bf16, tb, K, N, ldb);
  const auto c = matrix_desc(false, false, M, N, ldc);
  const dnnl::matmul::primitive_desc pd(
      bias ? dnnl::matmul::desc(a, b, matrix_desc(false, false, 1, N, N), c) : dnnl::matmul::desc(a, b, c), attr,
      d.engine);
  Primitive p{dnnl::matmul(pd), pd.impl_info_str(), pd.scratchpad_desc()};
  std::lock_guard lock(d.mu);
  if (d.cache.size() >= kMaxCached) d.cache.clear();
  d.cache.emplace(key, p);
  return p;
}

// C = op(A) op(B) for K <= kMaxK (kMaxKBf16 for bf16), one oneDNN call; a, b float32 or bf16.
// bias ([N] float32, or nullptr): added by oneDNN's kernel to each row while the row is in its
// registers, after the sum: C = AB + bias, as the epilogue would add it.
void onednn_call(bool bf16, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void* a, int64_t lda,
                 const void* b, int64_t ldb, float* c, int64_t ldc, const float* bias = nullptr) {
  RELPOS_CHECK(K <= (bf16 ? kMaxKBf16 : kMaxK), "onednn_call: K = {} is more than one chunk", K);
  dnnl::stream& s = thread_stream();
  const Primitive p = primitive({bf16, ta, tb, M, N, K, lda, ldb, ldc, bias != nullptr, omp_get_max_threads()});
  const dnnl::engine& e = onednn().engine;
  dnnl::memory ma(matrix_desc(bf16, ta, M, K, lda), e, const_cast<void*>(a));
  dnnl::memory mb(matrix_desc(bf16, tb, K, N, ldb), e, const_cast<void*>(b));
  dnnl::memory mc(matrix_desc(false, false, M, N, ldc), e, c);
  dnnl::memory scratch(p.scratch, e, thread_scratch(p.scratch.get_size()));
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}, {DNNL_ARG_SCRATCHPAD, scratch}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(matrix_desc(false, false, 1, N, N), e, const_cast<float*>(bias)));
  p.matmul.execute(s, args);
  s.wait();
}

// The [rows, cols] block at src (leading dim ld) as dense bf16 (leading dim cols) in dst's
// memory, which it returns: the CPU's conversion where it has one (kernels/cpu/bf16_convert.h;
// this path runs only with bf16 units, i.e. AVX512-BF16 or AMX), bf16_bits (core/float16.h) otherwise.
const uint16_t* pack_bf16(const float* src, int64_t rows, int64_t cols, int64_t ld, cpu::Scratch<uint16_t>& dst) {
  uint16_t* out = dst.get(size_t(rows * cols));
  const bool native = cpu::cpu_converts_bf16();
#pragma omp parallel for schedule(static) if (rows * cols >= (int64_t(1) << 16))
  for (int64_t r = 0; r < rows; ++r) {
    if (native) {
      cpu::bf16_row_native(src + r * ld, cols, out + r * cols);
    } else {
      for (int64_t j = 0; j < cols; ++j) out[r * cols + j] = bf16_bits(src[r * ld + j]);
    }
  }
  return out;
}

// Whether bf16 products run on relpos's own AMX pair kernel (kernels/cpu/tile_gemm.h) instead of
// oneDNN's: where the tile products do (the process's tile ISA is amxbf16: AMX-BF16 and no
// RELPOS_TILE_GEMM saying otherwise). The weight gradients (A transposed, B not: both operands
// stored K-major) by K chunks in onednn_product; the others by blocks of rows, pairs_rows_product.
// oneDNN converts nothing itself: relpos packed the operands to bf16 and oneDNN copied them again
// into its own layouts (A^T, and B in every call); the pair packing converts into the AMX layout in
// one pass, and the AMX instruction sequence is the same (the same bits, bench/RESULTS.md).
bool pairs_on_amx() {
  return cpu::tile_isa() == cpu::TileIsa::AmxBf16 && cpu::cpu_converts_bf16();
}

// C = op(A) op(B), float32 operands (rounded to bf16 while packed when bf16), any K. Above one
// chunk (kMaxK, kMaxKBf16 for bf16) each chunk's product is formed on its own — in a buffer, or C
// for chunk 0 — and they are added into C in chunk order: C = ((P0 + P1) + P2) + ... . The
// chunks go to the threads, one thread multiplying each whole chunk (oneDNN single-threaded
// inside the parallel region; bf16 operands packed chunk by chunk by that thread), so the bits
// cannot depend on the thread count (tests/kernels/test_gemm.cpp: 1, 2 and 3 threads in every
// layout). Two ways that did depend on it, measured: oneDNN's own accumulation into C (a sum
// post-op; float32, B transposed, K = 2048: 3 threads gave other bits than 1), and a chunk
// multiplied on 3 threads (the same shape). With more threads than chunks the other threads
// idle during these products: splitting a chunk's rows or columns into blocks, one thread each,
// was tried, and oneDNN's bits for a block differ from those of the whole product. The weight gradients (A transposed, K = the batch's rows, small
// M x N) gain most: split on M x N, both threads read every row of A and B; split on K, each
// reads its own rows once (the tiny model's step, 2 threads: 22.2 -> 21.4 ms float32, 15.7 ->
// 14.9 bf16). Chunks run in waves of one per thread: threads x M x N floats of scratch.
void onednn_product(bool bf16, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda,
                    const float* b, int64_t ldb, float* c, int64_t ldc, float* a_sums = nullptr) {
  const int64_t max_k = bf16 ? kMaxKBf16 : kMaxK, chunks = std::max<int64_t>(1, (K + max_k - 1) / max_k);
  // a_sums: chunk j's sums of op(A) along its K range in row j of sum_parts, by the chunk's thread
  // right after the chunk's product (A's chunk in its cache), then added in chunk order.
  thread_local cpu::Scratch<double> sum_buf;
  double* sum_parts = a_sums ? sum_buf.get(size_t(chunks * M)) : nullptr;
  // Chunk j's product into dst (leading dim ldd).
  const auto chunk = [&](int64_t j, float* dst, int64_t ldd) {
    const int64_t k0 = j * max_k, kc = std::min(max_k, K - k0);
    const float* ac = ta ? a + k0 * lda : a + k0;  // A stored [K, M] or [M, K]
    const float* bc = tb ? b + k0 : b + k0 * ldb;  // B stored [N, K] or [K, N]
    if (!bf16) {
      onednn_call(false, ta, tb, M, N, kc, ac, lda, bc, ldb, dst, ldd);
    } else if (ta && !tb && pairs_on_amx()) {
      // Both operands K-major (a weight gradient): A^T's pairs by column, B's by row, on AMX.
      thread_local cpu::Scratch<uint32_t> wa, wb;
      const int64_t np = (kc + 1) / 2;
      uint32_t* a_words = wa.get(size_t(M * np));
      // (a_sums: A's sums along this chunk, made while packing it, in sum_a_rows' order)
      cpu::bf16_col_pair_words_native(ac, lda, kc, M, a_words, np, sum_parts ? sum_parts + j * M : nullptr);
      cpu::TilePairs g;
      g.M = M, g.N = N, g.pairs = np;
      g.a = a_words, g.a_rs = np;
      g.b = cpu::pack_row_pairs(bc, ldb, kc, N, wb), g.ldb = N;
      g.c = dst, g.ldc = ldd;
      cpu::tile_gemm_pairs(cpu::TileIsa::AmxBf16, g);
      return;
    } else {
      thread_local cpu::Scratch<uint16_t> pa, pb;
      const uint16_t* a16 = pack_bf16(ac, ta ? kc : M, ta ? M : kc, lda, pa);
      const uint16_t* b16 = pack_bf16(bc, tb ? N : kc, tb ? kc : N, ldb, pb);
      onednn_call(true, ta, tb, M, N, kc, a16, ta ? M : kc, b16, tb ? kc : N, dst, ldd);
    }
    if (sum_parts) sum_a_rows(ta, ac, lda, M, kc, sum_parts + j * M);
  };
  const auto finish_sums = [&] {
    if (!sum_parts) return;
    for (int64_t m = 0; m < M; ++m) {
      double s = sum_parts[m];
      for (int64_t j = 1; j < chunks; ++j) s += sum_parts[j * M + m];
      a_sums[m] = float(s);
    }
  };
  if (chunks == 1) {
    chunk(0, c, ldc);
    return finish_sums();
  }
  const int64_t team = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t wave = std::min(team, chunks);
  thread_local cpu::Scratch<float> partial_buf;
  float* partials = partial_buf.get(size_t(wave * M * N));
  for (int64_t j0 = 0; j0 < chunks; j0 += wave) {
    const int64_t n = std::min(wave, chunks - j0);
    // Slot j - j0 of the buffer for chunk j (chunk 0: C). A team of `wave` threads even for a
    // last wave of fewer chunks: inside an active parallel region oneDNN runs on one thread.
#pragma omp parallel for schedule(static, 1) num_threads(int(wave)) if (wave > 1)
    for (int64_t j = j0; j < j0 + n; ++j) j == 0 ? chunk(j, c, ldc) : chunk(j, partials + (j - j0) * M * N, N);
    const int64_t first = std::max<int64_t>(j0, 1);
#pragma omp parallel for schedule(static) if (!omp_in_parallel() && M * N * (j0 + n - first) >= (int64_t(1) << 15))
    for (int64_t r = 0; r < M; ++r) {
      float* cr = c + r * ldc;
      for (int64_t j = first; j < j0 + n; ++j) {
        const float* pr = partials + (j - j0) * M * N + r * N;
#pragma omp simd
        for (int64_t col = 0; col < N; ++col) cr[col] += pr[col];
      }
    }
  }
  finish_sums();
}
#endif

// The [rows, cols] block at src (leading dim ld), each value rounded to bf16 / fp16 (kept in a
// float), dense (leading dim cols) in dst's memory, which it returns.
const float* round_copy(GemmInputs inputs, const float* src, int64_t rows, int64_t cols, int64_t ld,
                        cpu::Scratch<float>& dst) {
  float* out = dst.get(size_t(rows * cols));
#pragma omp parallel for schedule(static) if (rows * cols >= (int64_t(1) << 16))
  for (int64_t r = 0; r < rows; ++r)
    round_block(inputs == GemmInputs::BF16, src + r * ld, ld, out + r * cols, cols, 1, cols);
  return out;
}

// The epilogue of C's rows [rows, cols] (leading dim ld), row by row in one parallel pass (each
// row goes through every step while it is in L1; three passes, each its own parallel region, took
// 1.9 ms a call on the small model's bf16 fc1, 2048 x 1024): rounded to bf16 / fp16 when
// round_output, then bias added, then the activation, act' first into g (leading dim ldg) when g
// is set, then the product with m (leading dim ldg) when set, then the addend r (leading dim ldg)
// when set — the same per-element functions, in the same order, as k::unary, k::add and k::mul
// (kernels/cpu/unary_value.h).
template <typename T>
void finish_rows(GemmInputs inputs, bool round_output, T* c, int64_t rows, int64_t cols, int64_t ld,
                 const cpu::GemmEpilogue<T>& ep, T* g, int64_t ldg, const T* m, const T* r) {
  const auto row_epilogue = [&]<bool Act, Unary A>(T* cr, T* gr, const T* mr, const T* rr) {
    if constexpr (std::is_same_v<T, float>)
      if (round_output) round_block(inputs == GemmInputs::BF16, cr, ld, cr, ld, 1, cols);
    if (const T* bias = ep.bias) {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) cr[j] += bias[j];
    }
    if constexpr (!Act) {
      (void)gr;
    } else if (A == Unary::GeluErf && cpu::gelu_erf_run_if_f32<T>(cr, cr, gr, cols)) {
      // (the float32 GELU in its 16-lane form: the same values)
    } else if (gr) {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) cpu::activation_and_grad<A>(cr[j], cr[j], gr[j]);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) cr[j] = cpu::unary_value<A>(cr[j], T(0), T(0));
    }
    if (mr) {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) cr[j] *= mr[j];
    }
    if (rr) {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) cr[j] += rr[j];
    }
  };
  const auto run = [&]<bool Act, Unary A>() {
#pragma omp parallel for schedule(static) if (rows * cols >= (int64_t(1) << 14))
    for (int64_t i = 0; i < rows; ++i)
      row_epilogue.template operator()<Act, A>(c + i * ld, g ? g + i * ldg : nullptr, m ? m + i * ldg : nullptr,
                                               r ? r + i * ldg : nullptr);
  };
  if (!ep.has_act) return run.template operator()<false, Unary::Neg>();  // (A unused)
  cpu::visit_unary(ep.act, [&]<Unary A>() {
    if constexpr (is_activation(A)) {
      run.template operator()<true, A>();
    } else {
      fail("gemm epilogue: {} is not an activation", int(A));
    }
  });
}

// RELPOS_GEMM_PROFILE=1 (gemm.h): every GEMM call timed, summed per (inputs, layout, M, N, K,
// epilogue), and printed as a table to stderr when the process exits. perf cannot attribute
// oneDNN's JIT kernels (no unwind information, bench/perf_summary.py), so this is how a profile
// sees the GEMMs. Off (unset, empty or "0"): one test of a flag per call.
class GemmProfile {
 public:
  // The profile, or nullptr when RELPOS_GEMM_PROFILE is off (read once).
  static GemmProfile* get() {
    static GemmProfile* const p = []() -> GemmProfile* {
      if (!env_switch("RELPOS_GEMM_PROFILE")) return nullptr;
      static GemmProfile profile;
      return &profile;
    }();
    return p;
  }
  void record(const char* inputs, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const std::string& epilogue,
              double ms) {
    std::lock_guard lock(mu_);
    Row& r = rows_[{inputs, std::string(ta ? "T" : "N") + (tb ? "T" : "N"), M, N, K, epilogue}];
    ++r.calls;
    r.ms += ms;
  }
  void restart() {
    std::lock_guard lock(mu_);
    rows_.clear();
  }
  ~GemmProfile() {
    std::vector<std::pair<Key, Row>> rows(rows_.begin(), rows_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.second.ms > y.second.ms; });
    int64_t calls = 0;
    double ms = 0, flop = 0;
    for (const auto& [key, row] : rows) calls += row.calls, ms += row.ms, flop += flops(key) * double(row.calls);
    std::string out = fmt::format(
        "relpos GEMM profile (RELPOS_GEMM_PROFILE=1, {} OpenMP threads): {} calls, {:.1f} ms, {:.2f} GFLOP, {:.1f} "
        "GFLOP/s\n| inputs | op(A) op(B) | M | N | K | epilogue | calls | ms | ms/call | GFLOP/s |\n"
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|\n",
        omp_get_max_threads(), calls, ms, flop * 1e-9, ms > 0 ? flop / ms * 1e-6 : 0.0);
    for (const auto& [key, row] : rows)
      out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {:.2f} | {:.4f} | {:.1f} |\n", std::get<0>(key),
                         std::get<1>(key), std::get<2>(key), std::get<3>(key), std::get<4>(key), std::get<5>(key),
                         row.calls, row.ms, row.ms / double(row.calls),
                         row.ms > 0 ? flops(key) * double(row.calls) / row.ms * 1e-6 : 0.0);
    std::fputs(out.c_str(), stderr);
  }

 private:
  using Key = std::tuple<std::string, std::string, int64_t, int64_t, int64_t, std::string>;
  struct Row {
    int64_t calls = 0;
    double ms = 0;
  };
  static double flops(const Key& k) {
    return 2.0 * double(std::get<2>(k)) * double(std::get<3>(k)) * double(std::get<4>(k));
  }
  std::mutex mu_;
  std::map<Key, Row> rows_;
};

template <typename T>
std::string describe_epilogue(bool round_output, const cpu::GemmEpilogue<T>& ep) {
  std::string s = round_output ? "round" : "";
  const auto add = [&s](const char* part) { s += s.empty() ? part : std::string("+") + part; };
  if (ep.bias) add("bias");
  if (ep.has_act) add(ep.act_grad ? "act+grad" : "act");
  if (ep.mul) add("mul");
  if (ep.add) add("add");
  if (ep.a_sums) add("sums");
  return s.empty() ? "-" : s;
}

// The block of C given its epilogue (rounding, bias, activation) while in cache: about this many
// bytes for float32 products (half of a 2 MiB L2, or two cores' 1 MiB each). bf16 products take
// blocks of up to 16 MiB (the small and tiny models' every C in one call): oneDNN's AMX kernels
// copy B into their own layout in every call, and that copy is a large part of a product that
// runs 4x faster than float32. Measured (bench/RESULTS.md, five alternating runs, 2 threads): the
// small model's bf16 step 104.3 -> 101.6 (4 MiB) -> 100.3 ms (16 MiB); tiny and T = 2048
// unchanged; float32 blocks of 16 MiB or more: no change.
constexpr int64_t kEpilogueBlockBytes = int64_t(1) << 20;
constexpr int64_t kEpilogueBlockBytesBf16 = int64_t(1) << 24;

}  // namespace

namespace cpu {

namespace {

#if RELPOS_WITH_DNNL
// The rows of C that one thread takes whole in pairs_rows_product: fixed, so the bits do not depend
// on the thread count (each element's sum is the same whichever thread makes it in any case).
constexpr int64_t kPairBlockRows = 128;

// C = A op(B) (A not transposed: the forward products X W^T, the backward's dY W) on the AMX pair
// kernel, bf16 operands rounded while packed. B as pair words once (all of K; the weights: small),
// then C in blocks of kPairBlockRows rows, each taken whole by one thread: the block's rows of A
// packed as pair words in that thread's cache, multiplied by each K chunk of kMaxKBf16 (chunk 0
// into C, the later ones accumulated onto it: fma(1, P_j, C) = C + P_j, onednn_product's sum in
// its order), then the epilogue (finish) while the block is in cache. K odd with B transposed is
// not taken here (its pair packing needs an even K).
template <typename Finish>
void pairs_rows_product(bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
                        int64_t ldb, float* c, int64_t ldc, bool epilogue, const Finish& finish) {
  thread_local Scratch<uint32_t> bw;
  // B(k, j) pairs along k: [ceil(K / 2), N] words; chunk j's start at pair j kMaxKBf16 / 2
  const uint32_t* bwords = tb ? pack_pairs_cols(b, ldb, N, K, bw) : pack_row_pairs(b, ldb, K, N, bw);
  const int64_t chunks = (K + kMaxKBf16 - 1) / kMaxKBf16, blocks = (M + kPairBlockRows - 1) / kPairBlockRows;
#pragma omp parallel for schedule(static) if (blocks > 1 && !omp_in_parallel())
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t i0 = blk * kPairBlockRows, rows = std::min(kPairBlockRows, M - i0);
    thread_local Scratch<uint32_t> aw;
    for (int64_t j = 0; j < chunks; ++j) {
      const int64_t k0 = j * kMaxKBf16, kc = std::min(kMaxKBf16, K - k0), np = (kc + 1) / 2;
      TilePairs g;
      g.M = rows, g.N = N, g.pairs = np;
      g.a = pack_pairs_rows(a + i0 * lda + k0, lda, rows, kc, aw), g.a_rs = np;
      g.b = bwords + k0 / 2 * N, g.ldb = N;
      g.c = c + i0 * ldc, g.ldc = ldc;
      g.accumulate = j > 0;
      tile_gemm_pairs(TileIsa::AmxBf16, g);
    }
    if (epilogue) finish(i0, rows);
  }
}
#endif

#if RELPOS_WITH_DNNL
// C = op(A) op(B) with bf16 operands on the CPU's bf16 units (gemm_f32_run's bf16 path): relpos's
// AMX pair kernel where it takes the layout; oneDNN on all of C at once where K runs over one
// chunk, a's sums are wanted or A^T B would go to the AMX pairs' transposed layout; else oneDNN
// on blocks of `block` rows of bf16 copies, each finished (finish(i0, rows)) while in cache.
template <typename Finish>
void bf16_units_product(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
                        int64_t ldb, float* c, int64_t ldc, const GemmEpilogue<float>& ep, bool epilogue,
                        int64_t block, const Finish& finish) {
  if (!ta && !ep.a_sums && (!tb || K % 2 == 0) && pairs_on_amx())
    return pairs_rows_product(tb, M, N, K, a, lda, b, ldb, c, ldc, epilogue, finish);
  if (K > kMaxKBf16 || ep.a_sums || (ta && !tb && pairs_on_amx())) {  // all of C at once, then its epilogue
    onednn_product(true, ta, tb, M, N, K, a, lda, b, ldb, c, ldc, ep.a_sums);
    if (epilogue) finish(0, M);
    return;
  }
  thread_local Scratch<uint16_t> pa, pb;
  // Stored shapes: A is [M, K] ([K, M] when transposed), B is [K, N] ([N, K]).
  const uint16_t* a16 = pack_bf16(a, ta ? K : M, ta ? M : K, lda, pa);
  const uint16_t* b16 = pack_bf16(b, tb ? N : K, tb ? K : N, ldb, pb);
  const int64_t plda = ta ? M : K, pldb = tb ? K : N;
  for (int64_t i0 = 0; i0 < M; i0 += block) {
    const int64_t rows = std::min(block, M - i0);
    onednn_call(true, ta, tb, rows, N, K, ta ? a16 + i0 : a16 + i0 * plda, plda, b16, pldb, c + i0 * ldc, ldc);
    finish(i0, rows);
  }
}
#endif

// The sums of op(A)'s M rows of K values (float64, rounded once to float32) into sums [M].
void float_sums_of_a(bool ta, const float* a, int64_t lda, int64_t M, int64_t K, float* sums) {
  thread_local Scratch<double> acc;
  double* s = acc.get(size_t(M));
  sum_a_rows(ta, a, lda, M, K, s);
  for (int64_t m = 0; m < M; ++m) sums[m] = float(s[m]);
}

// gemm_f32 without its timing; round_output is only ever set with 16-bit inputs (gemm_f32 says so).
void gemm_f32_run(GemmInputs inputs, bool round_output, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                  const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                  const GemmEpilogue<float>& ep) {
  ensure_blas_core();
  // C in blocks of rows (A's rows i0 .. i0+rows-1: row i0 of A, or column i0 when A is stored
  // transposed), each block rounded and given its bias right after its product while it is in
  // cache (the epilogue).
  const bool epilogue = round_output || ep.bias != nullptr || ep.has_act || ep.mul != nullptr || ep.add != nullptr;
  const auto block_rows = [&](int64_t bytes) {
    return epilogue ? std::min(M, std::max<int64_t>(64, bytes / (4 * N))) : M;
  };
  const auto a_rows = [ta](const auto* p, int64_t i0, int64_t ld) { return ta ? p + i0 : p + i0 * ld; };
  const auto finish = [&](int64_t i0, int64_t rows) {
    finish_rows(inputs, round_output, c + i0 * ldc, rows, N, ldc, ep, ep.act_grad ? ep.act_grad + i0 * ep.ldg : nullptr,
                ep.ldg, ep.mul ? ep.mul + i0 * ep.ldg : nullptr, ep.add ? ep.add + i0 * ep.ldg : nullptr);
  };
#if RELPOS_WITH_DNNL
  const bool onednn_path = requested_provider() == Provider::OneDNN && K > 0;
  if (onednn_path && inputs == GemmInputs::BF16 && onednn().bf16_units)
    return bf16_units_product(ta, tb, M, N, K, a, lda, b, ldb, c, ldc, ep, epilogue, block_rows(kEpilogueBlockBytesBf16),
                              finish);
#else
  const bool onednn_path = false;
#endif
  // The sums of op(A) where onednn_product does not make them: from A's own float32 values,
  // before any rounding below.
  const bool f32_whole = onednn_path && inputs == GemmInputs::F32 && !epilogue;  // onednn_product
  if (ep.a_sums && !f32_whole) float_sums_of_a(ta, a, lda, M, K, ep.a_sums);
  thread_local Scratch<float> ra, rb;
  if (inputs != GemmInputs::F32) {  // no 16-bit unit: rounded copies of the operands, multiplied in float32
    a = round_copy(inputs, a, ta ? K : M, ta ? M : K, lda, ra), lda = ta ? M : K;
    b = round_copy(inputs, b, tb ? N : K, tb ? K : N, ldb, rb), ldb = tb ? K : N;
  }
  (void)onednn_path;
#if RELPOS_WITH_DNNL
  // A float32 product whose epilogue is only its bias: oneDNN adds it in its kernel, one call for
  // all of C (no blocks, no second pass; the same values).
  if (onednn_path && inputs == GemmInputs::F32 && !round_output && !ep.has_act && !ep.mul && !ep.add && ep.bias &&
      K <= kMaxK) {
    onednn_call(false, ta, tb, M, N, K, a, lda, b, ldb, c, ldc, ep.bias);
    return;
  }
  // A float32 product with no epilogue (the weight gradients among them): all of C at once.
  if (f32_whole) return onednn_product(false, ta, tb, M, N, K, a, lda, b, ldb, c, ldc, ep.a_sums);
#endif
  const int64_t block = block_rows(kEpilogueBlockBytes);
  // The block of rows from i0: its float32 product, then its epilogue.
  const auto f32_block = [&](int64_t i0) {
    const int64_t rows = std::min(block, M - i0);
#if RELPOS_WITH_DNNL
    if (onednn_path) {
      onednn_product(false, ta, tb, rows, N, K, a_rows(a, i0, lda), lda, b, ldb, c + i0 * ldc, ldc);
      finish(i0, rows);
      return;
    }
#endif
    openblas_sgemm(ta, tb, rows, N, K, a_rows(a, i0, lda), lda, b, ldb, c + i0 * ldc, ldc);
    finish(i0, rows);
  };
#if RELPOS_WITH_DNNL
  // A float32 product with an activation (fc1), a multiplier (its backward) or an addend (a
  // residual: the output projection, fc2): each thread takes
  // whole blocks, multiplies each on its own (oneDNN runs single-threaded inside a parallel
  // region) and finishes it in its own L2 right away: no barrier between a block's product and
  // its epilogue. The blocks are the same at every thread count, and so are the bits
  // (tests/kernels/test_gemm.cpp). Measured on the small model's fc1, 2048 x 1024 x 256, 2
  // threads: 4.05 -> 3.55 ms a call.
  if (onednn_path && inputs == GemmInputs::F32 && !round_output && (ep.has_act || ep.mul || ep.add) && K <= kMaxK &&
      M > block && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int64_t i0 = 0; i0 < M; i0 += block) f32_block(i0);
    return;
  }
#endif
  for (int64_t i0 = 0; i0 < M; i0 += block) f32_block(i0);
}

void gemm_f64_run(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* a, int64_t lda, const double* b,
                  int64_t ldb, double* c, int64_t ldc, const GemmEpilogue<double>& ep) {
  ensure_blas_core();
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              1.0, a, int(lda), b, int(ldb), 0.0, c, int(ldc));
  if (ep.bias || ep.has_act || ep.mul || ep.add)
    finish_rows(GemmInputs::F32, false, c, M, N, ldc, ep, ep.act_grad, ep.ldg, ep.mul, ep.add);
  if (ep.a_sums) sum_a_rows(ta, a, lda, M, K, ep.a_sums);
}

}  // namespace

void restart_gemm_profile() {
  if (GemmProfile* p = GemmProfile::get()) p->restart();
}

void gemm_f32(GemmInputs inputs, bool round_output, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a,
              int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, const GemmEpilogue<float>& ep) {
  if (M == 0 || N == 0) return;
  round_output = round_output && inputs != GemmInputs::F32;  // float32 products are not rounded
  GemmProfile* profile = GemmProfile::get();
  const double t0 = profile ? steady_ms() : 0.0;
  gemm_f32_run(inputs, round_output, ta, tb, M, N, K, a, lda, b, ldb, c, ldc, ep);
  if (profile)
    profile->record(inputs == GemmInputs::BF16   ? "bf16"
                    : inputs == GemmInputs::FP16 ? "fp16"
                                                 : "f32",
                    ta, tb, M, N, K, describe_epilogue(round_output, ep), steady_ms() - t0);
}

void gemm_f64(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* a, int64_t lda, const double* b,
              int64_t ldb, double* c, int64_t ldc, const GemmEpilogue<double>& ep) {
  if (M == 0 || N == 0) return;
  GemmProfile* profile = GemmProfile::get();
  const double t0 = profile ? steady_ms() : 0.0;
  gemm_f64_run(ta, tb, M, N, K, a, lda, b, ldb, c, ldc, ep);
  if (profile) profile->record("f64", ta, tb, M, N, K, describe_epilogue(false, ep), steady_ms() - t0);
}

}  // namespace cpu

std::string cpu_gemm_path(GemmInputs inputs) {
  GemmProfile::get();  // a wrong RELPOS_GEMM_PROFILE is named here (relpos info), not at the first GEMM
  const std::string blas = "OpenBLAS sgemm (" + ensure_blas_core().core + " kernels)";
  const char* why_f32 = inputs == GemmInputs::BF16   ? ", on the bf16 values in float32"
                        : inputs == GemmInputs::FP16 ? ", on the float16 values in float32"
                                                     : "";
#if RELPOS_WITH_DNNL
  if (requested_provider() == Provider::OpenBLAS) return blas + why_f32 + " [RELPOS_GEMM=openblas]";
  const dnnl_version_t* v = dnnl_version();
  const std::string lib = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                          std::to_string(v->patch);
  const bool bf16 = inputs == GemmInputs::BF16 && onednn().bf16_units;
  const Primitive probe = primitive({bf16, false, false, 256, 256, 256, 256, 256, 256, false, omp_get_max_threads()});
  std::string path = lib + " matmul " + probe.impl + (bf16 ? " (bf16 x bf16 -> float32)" : "");
  if (bf16 && pairs_on_amx())
    path =
        "relpos's AMX pair kernel (bf16 x bf16 -> float32; A B^T with an odd K: " + lib + " matmul " + probe.impl + ")";
  if (inputs == GemmInputs::BF16 && !bf16) path += ", on the bf16 values in float32: this CPU has no bf16 units";
  if (inputs == GemmInputs::FP16) path += ", on the float16 values in float32: oneDNN 2.6 has no CPU float16 matmul";
  return path;
#else
  return blas + why_f32 + " [built without oneDNN]";
#endif
}

}  // namespace relpos::k
