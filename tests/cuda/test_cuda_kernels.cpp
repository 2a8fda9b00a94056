// CUDA-vs-CPU parity of every kernel (relpos_cuda_tests: skipped without a GPU). The case
// table is the backend harness's (tests/support/backend_cases.h); on top of it: dropout
// masks equal to the CPU's, run-to-run determinism of the scatter-adds, the diagonal sum,
// the norm backwards and sum_squares, the same errors as the CPU for bad inputs, and the
// caching allocator / guard bytes on the device. The backend cases run in guard mode with
// poison (core/storage.h, core/storage_poison.h): guard bytes around every output, every
// block not asked to be zeroed starts as NaN, so an out-of-bounds write fails and a kernel that
// never writes (part of) its output cannot pass on a stale block that happens to match.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "core/cuda_runtime.h"
#include "core/storage.h"
#include "core/storage_poison.h"
#include "kernels/ops.h"
#include "../helpers.h"
#include "backend_cases.h"

using namespace relpos;
using cases::OpCase;

namespace {

std::vector<Tensor> run_case(const OpCase& c, DType dt, Device dev) {
  std::vector<Tensor> out = c.run(cases::make_inputs(c, dt, dev), dev);
  for (Tensor& o : out) o = o.to(Device::CPU);
  return out;
}

// "" when equal within tolerance (NaN == NaN, same infinities; exact: ==).
std::string compare(const Tensor& got, const Tensor& ref, double rtol, double atol, bool exact) {
  if (got.shape() != ref.shape()) return "shape " + shape_str(got.shape()) + " vs " + shape_str(ref.shape());
  if (got.dtype() != ref.dtype()) return "dtype differs";
  std::vector<double> g = got.to_vector<double>(), r = ref.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    const bool gn = std::isnan(g[i]), rn = std::isnan(r[i]);
    bool ok;
    if (gn || rn) ok = gn && rn;
    else if (std::isinf(r[i]) || std::isinf(g[i]) || exact) ok = g[i] == r[i];
    else ok = std::abs(g[i] - r[i]) <= atol + rtol * std::abs(r[i]);
    if (!ok) return fmt::format("element {}: cuda {:.17g}, cpu {:.17g}", i, g[i], r[i]);
  }
  return "";
}

bool bit_identical(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in.to(Device::CPU).contiguous(), b = b_in.to(Device::CPU).contiguous();
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), size_t(a.numel()) * dtype_size(a.dtype())) == 0;
}

Tensor rnd(const Shape& s, uint64_t seed, DType t = DType::F32) {
  Generator g(seed);
  return Tensor::randn(s, g, t).to(Device::CUDA);
}

Tensor ids(const std::vector<int64_t>& v, const Shape& s) { return Tensor::from_vector(v, s).to(Device::CUDA); }

// The message of the error f throws ("" if none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

struct GuardPoisonScope {
  GuardPoisonScope() {
    guard::reset_stats();
    guard::set_enabled(true);
    guard::set_poison(true);
  }
  ~GuardPoisonScope() {
    guard::set_poison(false);
    guard::set_enabled(false);
  }
};

}  // namespace

TEST_CASE("cuda: every backend case matches the cpu", "[cuda]") {
  GuardPoisonScope scope;
  int n = 0;
  for (const OpCase& c : cases::backend_cases())
    for (DType t : c.dtypes) {
      if (!cases::supported(c, t, Device::CUDA)) continue;  // k::supports(): no CUDA kernel (fused attention)
      std::string msg;
      try {
        auto got = run_case(c, t, Device::CUDA), ref = run_case(c, t, Device::CPU);
        if (got.size() != ref.size()) msg = "output count differs";
        for (size_t i = 0; msg.empty() && i < got.size(); ++i) {
          const double rtol = t == DType::F64 ? c.rtol64 : c.rtol32, atol = t == DType::F64 ? c.atol64 : c.atol32;
          msg = compare(got[i], ref[i], rtol, atol, c.exact);
          if (!msg.empty()) msg = fmt::format("output {}: {}", i, msg);
        }
      } catch (const std::exception& e) {
        msg = std::string("threw: ") + e.what();
      }
      const uint64_t violations = guard::stats().violations;  // (the case's tensors are freed: checked)
      if (violations > 0) msg += fmt::format(" {} allocations with overwritten guard bytes", violations);
      guard::reset_stats();
      INFO(c.name << " " << dtype_name(t));
      CHECK(msg == "");
      ++n;
    }
  CHECK(n > 300);
  // the poison is on: a block handed out again holds NaN, not the last tensor's values
  void* first = nullptr;
  {
    Tensor t = Tensor::full({1000}, 3.0, DType::F32, Device::CUDA);
    first = t.raw_data();
  }
  Tensor again = Tensor::empty({1000}, DType::F32, Device::CUDA);
  CHECK(again.raw_data() == first);
  for (float f : again.to_vector<float>()) REQUIRE(std::isnan(f));
}

TEST_CASE("cuda: dropout masks equal the cpu's for the same seed and offset", "[cuda]") {
  for (double p : {0.0, 0.1, 0.5, 0.9})
    for (DType t : {DType::F32, DType::F64}) {
      Generator gc(123), gg(123);
      gc.advance(77), gg.advance(77);
      Tensor mc = k::dropout_mask({33, 257}, p, gc, t, Device::CPU);
      Tensor mg = k::dropout_mask({33, 257}, p, gg, t, Device::CUDA);
      INFO("p " << p << " " << dtype_name(t));
      CHECK(mg.device() == Device::CUDA);
      CHECK(bit_identical(mg, mc));
      CHECK(gc.state() == gg.state());  // both advanced by numel
      // and the next mask continues the same stream
      CHECK(bit_identical(k::dropout_mask({5}, p, gg, t, Device::CUDA), k::dropout_mask({5}, p, gc, t, Device::CPU)));
    }
}

TEST_CASE("cuda: scatter-adds, diagonal sums, norm backwards and sum_squares are deterministic", "[cuda]") {
  // Many duplicate indices: where float atomics would make the order (and the bits) vary.
  std::vector<int64_t> v(4096);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 7919) % 5);
  Tensor idx = ids(v, {4096});
  Tensor gy = rnd({4096, 64}, 1);
  Tensor e1 = k::embedding_backward(gy, idx, 5), e2 = k::embedding_backward(gy, idx, 5);
  CHECK(bit_identical(e1, e2));
  CHECK(bit_identical(e1, k::embedding_backward(gy.to(Device::CPU), idx.to(Device::CPU), 5)));

  Tensor src = rnd({3, 4096, 2}, 2);
  Tensor ia = k::index_add({3, 5, 2}, 1, idx, src), ib = k::index_add({3, 5, 2}, 1, idx, src);
  CHECK(bit_identical(ia, ib));
  CHECK(bit_identical(ia, k::index_add({3, 5, 2}, 1, idx.to(Device::CPU), src.to(Device::CPU))));

  Tensor gidx = ids(std::vector<int64_t>(v.begin(), v.end()), {64, 64});
  Tensor s2 = rnd({64, 64}, 3);
  Tensor sa = k::scatter_add({64, 5}, 1, gidx, s2), sb = k::scatter_add({64, 5}, 1, gidx, s2);
  CHECK(bit_identical(sa, sb));
  CHECK(bit_identical(sa, k::scatter_add({64, 5}, 1, gidx.to(Device::CPU), s2.to(Device::CPU))));

  Tensor ds = rnd({4, 8, 100, 130}, 4);
  Tensor d1 = k::toeplitz_diag_sum(ds), d2 = k::toeplitz_diag_sum(ds);
  CHECK(bit_identical(d1, d2));
  CHECK(bit_identical(d1, k::toeplitz_diag_sum(ds.to(Device::CPU))));

  Tensor x = rnd({513, 257}, 5), g = rnd({513, 257}, 6), w = rnd({257}, 7), b = rnd({257}, 8);
  k::NormOut o = k::layer_norm(x, w, b, 1e-5);
  k::NormGrads n1 = k::layer_norm_backward(g, x, o.mean, o.rstd, w, true);
  k::NormGrads n2 = k::layer_norm_backward(g, x, o.mean, o.rstd, w, true);
  CHECK(bit_identical(n1.dx, n2.dx));
  CHECK(bit_identical(n1.dweight, n2.dweight));
  CHECK(bit_identical(n1.dbias, n2.dbias));
  k::NormOut r = k::rms_norm(x, w, 1e-6);
  k::NormGrads r1 = k::rms_norm_backward(g, x, r.rstd, w), r2 = k::rms_norm_backward(g, x, r.rstd, w);
  CHECK(bit_identical(r1.dx, r2.dx));
  CHECK(bit_identical(r1.dweight, r2.dweight));

  Tensor big = rnd({3, 100003}, 9);
  Tensor q1 = k::sum_squares(big), q2 = k::sum_squares(big);
  CHECK(q1.dtype() == DType::F64);
  CHECK(q1.dim() == 0);
  CHECK(bit_identical(q1, q2));
  const double cpu = k::sum_squares(big.to(Device::CPU)).item();
  CHECK(std::abs(q1.item() - cpu) <= 1e-12 * cpu);
}

TEST_CASE("cuda: the depthwise convolution (cpe) and its backward give the cpu's bits, run after run", "[cuda]") {
  // A digits-sized batch: 32 images of 16x16 tokens, 32 channels, 3x3 and 5x5 kernels. dw and
  // dbias sum over 8192 cells in float64 in the CPU's order (kernels/cuda/conv.cu).
  for (const int64_t K : {3, 5}) {
    Tensor x = rnd({32, 16, 16, 32}, 20 + uint64_t(K)), w = rnd({32, K, K}, 30 + uint64_t(K)), b = rnd({32}, 40);
    Tensor gy = rnd({32, 16, 16, 32}, 50 + uint64_t(K));
    Tensor y = k::depthwise_conv2d(x, w, b);
    CHECK(bit_identical(y, k::depthwise_conv2d(x, w, b)));
    CHECK(bit_identical(y, k::depthwise_conv2d(x.to(Device::CPU), w.to(Device::CPU), b.to(Device::CPU))));
    k::ConvGrads g1 = k::depthwise_conv2d_backward(gy, x, w, true), g2 = k::depthwise_conv2d_backward(gy, x, w, true);
    k::ConvGrads gc = k::depthwise_conv2d_backward(gy.to(Device::CPU), x.to(Device::CPU), w.to(Device::CPU), true);
    CHECK(bit_identical(g1.dx, g2.dx));
    CHECK(bit_identical(g1.dw, g2.dw));
    CHECK(bit_identical(g1.dbias, g2.dbias));
    CHECK(bit_identical(g1.dx, gc.dx));
    CHECK(bit_identical(g1.dw, gc.dw));
    CHECK(bit_identical(g1.dbias, gc.dbias));
  }
}

TEST_CASE("cuda: the fused Adam step gives the cpu's bits", "[cuda]") {
  for (bool decoupled : {true, false}) {
    Tensor p = rnd({1000}, 1), g = rnd({1000}, 2), m = rnd({1000}, 3), v = rnd({1000}, 4);
    k::mul_(v, 0.0);
    Tensor pc = p.to(Device::CPU), gc = g.to(Device::CPU), mc = m.to(Device::CPU), vc = v.to(Device::CPU);
    for (int t = 1; t <= 5; ++t) {
      k::AdamStep s{1e-3, 0.9, 0.999, 1e-8, 0.1, decoupled, 1.0 - std::pow(0.9, t), 1.0 - std::pow(0.999, t)};
      k::adam_update(p, g, m, v, s);
      k::adam_update(pc, gc, mc, vc, s);
    }
    INFO("decoupled " << decoupled);
    CHECK(bit_identical(p, pc));
    CHECK(bit_identical(m, mc));
    CHECK(bit_identical(v, vc));
  }
}

TEST_CASE("cuda: bad inputs give the cpu's errors", "[cuda]") {
  Tensor w = rnd({5, 3}, 1);
  Tensor bad = ids({0, 7}, {2});
  auto both = [](auto f_cpu, auto f_cuda) {
    // device-side checks throw at the next host read (here: check_device_errors)
    const std::string a = error_of(f_cpu), b = error_of([&] {
                                             f_cuda();
                                             cuda::check_device_errors();
                                           });
    INFO("cpu: " << a << "\ncuda: " << b);
    CHECK(!a.empty());
    // the same text up to the device each side names ("int64 [2] on cpu" / "... on cuda")
    CHECK(test::without_device_names(a) == test::without_device_names(b));
    CHECK(a.find("on cuda") == std::string::npos);
    CHECK((a.find("on cpu") == std::string::npos) == (b.find("on cuda") == std::string::npos));
  };
  both([&] { k::embedding(w.to(Device::CPU), bad.to(Device::CPU)); }, [&] { k::embedding(w, bad); });
  both([&] { k::embedding_backward(rnd({2, 3}, 2).to(Device::CPU), bad.to(Device::CPU), 5); },
       [&] { k::embedding_backward(rnd({2, 3}, 2), bad, 5); });
  both([&] { k::index_select(w.to(Device::CPU), 0, bad.to(Device::CPU)); }, [&] { k::index_select(w, 0, bad); });
  Tensor gi = ids({0, 1, 9, 0, 1, 2}, {2, 3});
  both([&] { k::gather(w.to(Device::CPU), 1, gi.to(Device::CPU)); }, [&] { k::gather(w, 1, gi); });
  both([&] { k::scatter_add({2, 3}, 1, gi.to(Device::CPU), rnd({2, 3}, 3).to(Device::CPU)); },
       [&] { k::scatter_add({2, 3}, 1, gi, rnd({2, 3}, 3)); });
  Tensor t7 = Tensor::from_vector<int64_t>({1, 7, 0, 2, 1}, {5});
  both([&] { k::cross_entropy(w.to(Device::CPU), t7, -100, k::Reduction::Mean); },
       [&] { k::cross_entropy(w, t7.to(Device::CUDA), -100, k::Reduction::Mean); });
  both([&] { k::matmul(rnd({2, 3}, 4).to(Device::CPU), rnd({4, 2}, 5).to(Device::CPU)); },
       [&] { k::matmul(rnd({2, 3}, 4), rnd({4, 2}, 5)); });
  both([&] { k::binary(k::Binary::Add, rnd({2, 3}, 4).to(Device::CPU), rnd({4}, 5).to(Device::CPU)); },
       [&] { k::binary(k::Binary::Add, rnd({2, 3}, 4), rnd({4}, 5)); });
  Tensor zi = ids({1, 0}, {2});
  both([&] { k::div(ids({4, 4}, {2}).to(Device::CPU), zi.to(Device::CPU)); }, [&] { k::div(ids({4, 4}, {2}), zi); });
  both([&] { k::toeplitz_add(rnd({1, 2, 3, 4}, 6).to(Device::CPU), rnd({2, 5}, 7).to(Device::CPU)); },
       [&] { k::toeplitz_add(rnd({1, 2, 3, 4}, 6), rnd({2, 5}, 7)); });
  both([&] { Generator g(1); k::dropout_mask({3}, 1.0, g, DType::F32, Device::CPU); },
       [&] { Generator g(1); k::dropout_mask({3}, 1.0, g, DType::F32, Device::CUDA); });
  both([&] { k::reduce(k::Reduce::Max, rnd({0, 3}, 8).to(Device::CPU), {0}, false); },
       [&] { k::reduce(k::Reduce::Max, rnd({0, 3}, 8), {0}, false); });
  // mixed devices: the dispatcher names the op and both devices
  const std::string mixed = error_of([&] { k::add(rnd({2}, 1), rnd({2}, 1).to(Device::CPU)); });
  CHECK(mixed.find("different devices") != std::string::npos);
}

TEST_CASE("cuda: a bad index is thrown at the next host read, with the cpu's message, and only once", "[cuda]") {
  Tensor w = rnd({5, 3}, 1);
  cuda::check_device_errors();
  Tensor out = k::embedding(w, ids({0, 7, -1}, {3}));  // queued: nothing read back yet
  CHECK(cuda::pending_device_checks() >= 1);
  Tensor fine = k::add(w, w);
  // the read of an unrelated tensor reports the failure (the earliest launch, first bad element)
  CHECK_THROWS_WITH(fine.to(Device::CPU), "embedding: index 7 out of range [0, 5)");
  CHECK(cuda::pending_device_checks() == 0);
  CHECK_NOTHROW(fine.to(Device::CPU));  // the record was reset
  // two bad launches: the first one's message
  k::gather(w, 1, ids({0, 1, 2, 3, 1, 0}, {2, 3}));
  k::index_select(w, 0, ids({9}, {1}));
  CHECK_THROWS_WITH(cuda::check_device_errors(), "gather: index 3 out of range [0, 3) along dim 1");
  CHECK_NOTHROW(cuda::check_device_errors());
  // reads larger than the folded size carry the record in a second transfer
  k::embedding(w, ids({5}, {1}));
  CHECK_THROWS_WITH(rnd({100000}, 2).to(Device::CPU), "embedding: index 5 out of range [0, 5)");
}

TEST_CASE("cuda: the scatter-adds sort on the device: many segments, duplicates, empty rows", "[cuda]") {
  // up to 2^17 segments (radix sort over 18 bits) with most segments empty and long runs
  for (int64_t V : {1, 3, 1000, 131071}) {
    std::vector<int64_t> v(20000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 2654435761u) % uint64_t(std::min<int64_t>(V, 977)));
    Tensor idx = ids(v, {int64_t(v.size())});
    Tensor gy = rnd({int64_t(v.size()), 3}, 11);
    Tensor e = k::embedding_backward(gy, idx, V);
    INFO("V " << V);
    CHECK(bit_identical(e, k::embedding_backward(gy.to(Device::CPU), idx.to(Device::CPU), V)));
  }
  Tensor gidx = ids(std::vector<int64_t>(4 * 5 * 6, 2), {4, 5, 6});
  Tensor src = rnd({4, 5, 6}, 12, DType::F64);
  for (int64_t dim : {0, 1, 2}) {
    Shape shape{4, 5, 6};
    shape[size_t(dim)] = 7;
    INFO("dim " << dim);
    CHECK(bit_identical(k::scatter_add(shape, dim, gidx, src),
                        k::scatter_add(shape, dim, gidx.to(Device::CPU), src.to(Device::CPU))));
  }
}

TEST_CASE("cuda: cross-entropy keeps the row count on the device", "[cuda]") {
  Tensor logits = rnd({6, 4}, 1);
  Tensor tg = ids({1, -100, 3, 0, -100, 2}, {6});
  k::CrossEntropyOut o = k::cross_entropy(logits, tg, -100, k::Reduction::Mean);
  CHECK(o.count == -1);
  CHECK(o.count_device.device() == Device::CUDA);
  CHECK(o.counted() == 4);
  k::CrossEntropyOut c = k::cross_entropy(logits.to(Device::CPU), tg.to(Device::CPU), -100, k::Reduction::Mean);
  CHECK(std::abs(o.loss.item() - c.loss.item()) <= 1e-6 * std::abs(c.loss.item()));
  Tensor g = Tensor::scalar(1.0, DType::F32, Device::CUDA);
  Tensor dx = k::cross_entropy_backward(g, logits, o.lse, tg, -100, k::Reduction::Mean, o.count);
  Tensor dc = k::cross_entropy_backward(g.to(Device::CPU), logits.to(Device::CPU), c.lse, tg.to(Device::CPU), -100,
                                        k::Reduction::Mean, c.count);
  CHECK(compare(dx.to(Device::CPU), dc, 1e-5, 1e-6, false) == "");
  // all rows ignored: mean 0, gradient 0
  Tensor none = ids({-100, -100, -100, -100, -100, -100}, {6});
  CHECK(k::cross_entropy(logits, none, -100, k::Reduction::Mean).loss.item() == 0.0);
}

TEST_CASE("cuda: tf32 switch and matmul layouts", "[cuda]") {
  Tensor a = rnd({64, 96}, 1), b = rnd({96, 32}, 2);
  Tensor ref = k::matmul(a.to(Device::CPU), b.to(Device::CPU));
  k::set_allow_tf32(false);
  Tensor strict = k::matmul(a, b).to(Device::CPU);
  for (int64_t i = 0; i < ref.numel(); ++i)
    CHECK(std::abs(strict.data<float>()[i] - ref.data<float>()[i]) <= 1e-4f * (1.0f + std::abs(ref.data<float>()[i])));
  k::set_allow_tf32(true);
  Tensor fast = k::matmul(a, b).to(Device::CPU);  // TF32: ~1e-3 relative
  k::set_allow_tf32(false);
  for (int64_t i = 0; i < ref.numel(); ++i)
    CHECK(std::abs(fast.data<float>()[i] - ref.data<float>()[i]) <= 5e-2f * (1.0f + std::abs(ref.data<float>()[i])));
}

TEST_CASE("cuda: 16-bit GEMMs (bf16 / fp16 operands, float32 accumulation) match the CPU in every layout",
          "[cuda][precision]") {
  // Operands hold bf16 / fp16 values (autocast's rounding), so cuBLAS's 16-bit GEMM multiplies
  // the same values as the CPU; only the summation order differs (float32 accumulation).
  for (auto [in, round] :
       {std::pair{k::GemmInputs::BF16, k::Unary::RoundBF16}, std::pair{k::GemmInputs::FP16, k::Unary::RoundFP16}}) {
    Tensor a = k::unary(round, rnd({3, 40, 72}, 11)), b = k::unary(round, rnd({72, 24}, 12));
    Tensor bt = k::unary(round, rnd({3, 24, 72}, 13)).transpose(-1, -2);  // batched, transposed view
    for (const auto& [x, y] :
         {std::pair{a, b}, std::pair{a, bt}, std::pair{a.transpose(-1, -2).contiguous().transpose(-1, -2), b}}) {
      Tensor ref = k::matmul(x.to(Device::CPU), y.to(Device::CPU));  // float32 on the CPU
      Tensor got = k::matmul(x, y, in).to(Device::CPU);
      REQUIRE(got.shape() == ref.shape());
      for (int64_t i = 0; i < ref.numel(); ++i)
        CHECK(std::abs(got.data<float>()[i] - ref.data<float>()[i]) <= 1e-4f * (1.0f + std::abs(ref.data<float>()[i])));
      // round_output: 16-bit values, one 16-bit step from the rounded CPU product at most.
      Tensor rounded = k::matmul(x, y, in, true).to(Device::CPU), want = k::unary(round, ref);
      const float step = in == k::GemmInputs::BF16 ? 0x1p-7f : 0x1p-10f;
      for (int64_t i = 0; i < ref.numel(); ++i) {
        const float r = rounded.data<float>()[i], w = want.data<float>()[i];
        CHECK(k::unary(round, Tensor::full({1}, double(r), DType::F32)).data<float>()[0] == r);
        CHECK(std::abs(r - w) <= step * std::abs(w) + 1e-6f);
      }
    }
  }
}

TEST_CASE("cuda: the caching allocator reuses blocks and only zeroes when asked", "[cuda]") {
  cuda::empty_cache();
  CHECK(cuda::cached_bytes() == 0);
  void* first = nullptr;
  {
    Tensor t = Tensor::full({1000}, 3.0, DType::F32, Device::CUDA);
    first = t.raw_data();
  }
  CHECK(cuda::cached_bytes() >= 4000);
  {
    Tensor z = Tensor::zeros({1000}, DType::F32, Device::CUDA);  // reuses the block, zeroed
    CHECK(z.raw_data() == first);
    for (float f : z.to_vector<float>()) REQUIRE(f == 0.0f);
  }
  cuda::empty_cache();
  CHECK(cuda::cached_bytes() == 0);
}
