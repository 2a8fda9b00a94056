// CUDA-vs-CPU parity at the shapes where launch geometry matters ([cuda][large]): more blocks
// than a grid dimension holds (grid_for and grid_rows cap at 65,535 and loop), the chunked
// gridDim.y loops of the column reductions and the norm backwards (more than 65,535 chunks), the
// chunked whole-tensor sum (more than 65,535 chunks of 8192), and the split-head batched GEMMs of
// the small model (batch 8, 8 heads, length 256, head dim 32, d_model 256) in the layouts
// attention uses. The backend case table (test_cuda_kernels.cpp) has only small shapes.
#include <catch2/catch.hpp>
#include <cmath>
#include <fmt/format.h>

#include "core/cuda_runtime.h"
#include "core/tensor.h"
#include "kernels/ops.h"

using namespace relpos;

namespace {

constexpr int64_t kMaxGrid = 65535;  // kernels/cuda/common.cuh: the cap of grid_for / grid_rows
constexpr int64_t kThreads = 256;    // block size of every launch

Tensor randn_on(const Shape& s, uint64_t seed, Device dev) {
  Generator g(seed);
  return Tensor::randn(s, g, DType::F32).to(dev);
}

Tensor scaled(const Tensor& t, double s) {
  return k::binary(k::Binary::Mul, t, Tensor::full({1}, s, t.dtype(), t.device()));
}

// "" when every element of got (copied to the host) is within atol + rtol |ref|; else the
// worst element and how many differ.
std::string differs(const Tensor& got_dev, const Tensor& ref, double rtol, double atol) {
  const Tensor got = got_dev.to(Device::CPU);
  if (got.shape() != ref.shape()) return "shape " + shape_str(got.shape()) + " vs " + shape_str(ref.shape());
  const std::vector<double> g = got.to_vector<double>(), r = ref.to_vector<double>();
  int64_t bad = 0, worst = -1;
  double worst_excess = 0.0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double lim = atol + rtol * std::abs(r[i]), d = std::abs(g[i] - r[i]);
    if (!(d <= lim)) {  // (NaN fails)
      ++bad;
      const double excess = std::isnan(d) ? INFINITY : d - lim;
      if (worst < 0 || excess > worst_excess) worst = int64_t(i), worst_excess = excess;
    }
  }
  if (bad == 0) return "";
  return fmt::format("{} of {} elements differ; worst: element {}: cuda {:.9g}, cpu {:.9g}", bad, g.size(), worst,
                     g[size_t(worst)], r[size_t(worst)]);
}

}  // namespace

TEST_CASE("cuda large: elementwise ops past 65,535 blocks (grid-stride loops)", "[cuda][large]") {
  const int64_t n = kMaxGrid * kThreads + 4099;  // one grid covers all but the last 4099 + 1 pass
  const Tensor x = randn_on({n}, 1, Device::CPU), y = randn_on({n}, 2, Device::CPU);
  const Tensor xd = x.to(Device::CUDA), yd = y.to(Device::CUDA);
  CHECK(differs(k::unary(k::Unary::Exp, xd), k::unary(k::Unary::Exp, x), 1e-6, 0.0) == "");
  CHECK(differs(k::binary(k::Binary::Mul, xd, yd), k::binary(k::Binary::Mul, x, y), 0.0, 0.0) == "");
  // broadcast over rows: [n / 7, 7] + [7]
  const int64_t rows = n / 7;
  const Tensor m = x.narrow(0, 0, rows * 7).reshape({rows, 7}), b = randn_on({7}, 3, Device::CPU);
  CHECK(differs(k::binary(k::Binary::Add, m.to(Device::CUDA), b.to(Device::CUDA)), k::binary(k::Binary::Add, m, b), 0.0,
                0.0) == "");
}

TEST_CASE("cuda large: one-block-per-row kernels past 65,535 rows (softmax, norms, cross-entropy, row sums)",
          "[cuda][large]") {
  const int64_t rows = kMaxGrid + 4466;
  const Tensor x = randn_on({rows, 40}, 4, Device::CPU), xd = x.to(Device::CUDA);
  CHECK(differs(k::softmax(xd, -1), k::softmax(x, -1), 1e-5, 1e-7) == "");
  CHECK(differs(k::log_softmax(xd, -1), k::log_softmax(x, -1), 1e-5, 1e-6) == "");
  CHECK(differs(k::reduce(k::Reduce::Sum, xd, {1}, false), k::reduce(k::Reduce::Sum, x, {1}, false), 1e-5, 1e-5) == "");
  const Tensor w = randn_on({40}, 5, Device::CPU), b = randn_on({40}, 6, Device::CPU);
  const k::NormOut o = k::layer_norm(xd, w.to(Device::CUDA), b.to(Device::CUDA), 1e-5);
  const k::NormOut oc = k::layer_norm(x, w, b, 1e-5);
  CHECK(differs(o.y, oc.y, 1e-5, 1e-5) == "");
  CHECK(differs(o.rstd, oc.rstd, 1e-5, 0.0) == "");
  const Tensor gy = randn_on({rows, 40}, 7, Device::CPU);
  const k::NormGrads g = k::layer_norm_backward(gy.to(Device::CUDA), xd, o.mean, o.rstd, w.to(Device::CUDA), true);
  const k::NormGrads gc = k::layer_norm_backward(gy, x, oc.mean, oc.rstd, w, true);
  CHECK(differs(g.dx, gc.dx, 1e-4, 1e-5) == "");
  CHECK(differs(g.dweight, gc.dweight, 1e-5, 1e-4) == "");
  CHECK(differs(g.dbias, gc.dbias, 1e-5, 1e-4) == "");
  // cross-entropy: one block per row
  std::vector<int64_t> tv(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) tv[size_t(i)] = (i * 7919) % 40;
  const Tensor t = Tensor::from_vector(tv, {rows});
  const k::CrossEntropyOut ce = k::cross_entropy(xd, t.to(Device::CUDA), -100, k::Reduction::Mean);
  const k::CrossEntropyOut cc = k::cross_entropy(x, t, -100, k::Reduction::Mean);
  CHECK(differs(ce.loss, cc.loss, 1e-6, 0.0) == "");
}

TEST_CASE("cuda large: chunked gridDim.y loops (column sums, norm weight gradients) past 65,535 chunks",
          "[cuda][large]") {
  // 64 rows a chunk (kColChunk, kNormRowChunk in kernels/cuda/launch.h): 65,535 chunks and more
  const int64_t R = (kMaxGrid + 1234) * 64 + 17, K = 3;
  const Tensor x = randn_on({R, K}, 8, Device::CPU), xd = x.to(Device::CUDA);
  CHECK(differs(k::reduce(k::Reduce::Sum, xd, {0}, false), k::reduce(k::Reduce::Sum, x, {0}, false), 1e-9, 1e-6) == "");
  CHECK(differs(k::reduce(k::Reduce::Mean, xd, {0}, false), k::reduce(k::Reduce::Mean, x, {0}, false), 1e-9, 1e-9) ==
        "");
  const Tensor w = randn_on({K}, 9, Device::CPU), gy = randn_on({R, K}, 10, Device::CPU);
  const k::NormOut o = k::rms_norm(xd, w.to(Device::CUDA), 1e-6);
  const k::NormOut oc = k::rms_norm(x, w, 1e-6);
  const k::NormGrads g = k::rms_norm_backward(gy.to(Device::CUDA), xd, o.rstd, w.to(Device::CUDA));
  const k::NormGrads gc = k::rms_norm_backward(gy, x, oc.rstd, w);
  CHECK(differs(g.dweight, gc.dweight, 1e-6, 1e-3) == "");
  CHECK(differs(g.dx, gc.dx, 1e-4, 1e-5) == "");
}

TEST_CASE("cuda large: a whole-tensor sum past 65,535 chunks of 8192", "[cuda][large]") {
  const int64_t n = (kMaxGrid + 3) * 8192 + 5;  // ~537M floats: 2.1 GB on the device
  const Tensor ones = Tensor::full({n}, 1.0, DType::F32, Device::CUDA);
  // every element counted once: the float64 partials hold n exactly; the float32 result is n
  // rounded to float32
  const Tensor s = k::reduce(k::Reduce::Sum, ones, {}, false);
  CHECK(s.to(Device::CPU).item() == double(float(double(n))));
  const Tensor q = k::sum_squares(ones);  // float64 result
  CHECK(q.item() == double(n));
}

TEST_CASE("cuda large: split-head batched GEMMs at the small model's shapes match the cpu", "[cuda][large]") {
  k::set_allow_tf32(false);
  const int64_t B = 8, H = 8, L = 256, Dh = 32, D = H * Dh;
  const Tensor x = randn_on({B, L, D}, 11, Device::CPU);
  const Tensor wqkv = scaled(randn_on({D, 3 * D}, 12, Device::CPU), 1.0 / 16.0);  // q, k, v ~ N(0, 1)
  const Tensor xd = x.to(Device::CUDA), wd = wqkv.to(Device::CUDA);
  // the projection: [B * L, D] x [D, 3D]
  const Tensor qkv = k::matmul(x.reshape({B * L, D}), wqkv);
  const Tensor qkv_d = k::matmul(xd.reshape({B * L, D}), wd);
  REQUIRE(differs(qkv_d, qkv, 1e-4, 1e-3) == "");
  // split heads: [B, L, 3, H, Dh] -> q, k, v [B, H, L, Dh] strided views (no copy)
  auto heads = [&](const Tensor& t, int64_t which) {
    return t.reshape({B, L, 3, H, Dh}).select(2, which).transpose(1, 2);
  };
  const Tensor q = heads(qkv, 0), kk = heads(qkv, 1), v = heads(qkv, 2);
  const Tensor qd = heads(qkv_d, 0), kd = heads(qkv_d, 1), vd = heads(qkv_d, 2);
  // scores = q k^T [B, H, L, L]; out = scores v [B, H, L, Dh]; the backward's layouts: scores^T v,
  // q^T-style products through transposed views
  const Tensor s = k::matmul(q, kk.transpose(-1, -2)), sd = k::matmul(qd, kd.transpose(-1, -2));
  CHECK(differs(sd, s, 1e-4, 1e-4) == "");
  const double r = 1.0 / std::sqrt(double(Dh));
  const Tensor p = k::softmax(scaled(s, r), -1), pd = k::softmax(scaled(sd, r), -1);
  CHECK(differs(k::matmul(pd, vd), k::matmul(p, v), 1e-4, 1e-4) == "");
  CHECK(differs(k::matmul(pd.transpose(-1, -2), vd), k::matmul(p.transpose(-1, -2), v), 1e-4, 1e-4) == "");
  CHECK(differs(k::matmul(qd.transpose(-1, -2), kd), k::matmul(q.transpose(-1, -2), kk), 1e-4, 1e-3) == "");
  // merge heads back: [B, H, L, Dh] -> [B, L, D] (a copy), then the output projection
  const Tensor o = k::matmul(p, v).transpose(1, 2).reshape({B * L, D});
  const Tensor od = k::matmul(pd, vd).transpose(1, 2).reshape({B * L, D});
  const Tensor wo = randn_on({D, D}, 13, Device::CPU);
  CHECK(differs(k::matmul(od, wo.to(Device::CUDA)), k::matmul(o, wo), 1e-4, 1e-3) == "");
}
