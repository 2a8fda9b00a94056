// The BLAS kernel set in use matches the CPU (kernels/cpu/blas_core.cpp): an OpenBLAS whose own
// detection fell back below AVX2 on a CPU with AVX2 or AVX-512 is switched, and GEMMs after the
// switch are still right.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>

#include "kernels/ops.h"

using namespace relpos;

TEST_CASE("the BLAS core uses the CPU's vector unit, GEMM after the switch matches float64", "[kernels]") {
  const k::BlasCore& c = k::ensure_blas_core();
  INFO("library " << c.library << ", loaded core " << c.loaded << ", core in use " << c.core << ", CPU tier "
                  << c.cpu_tier << ", note: " << c.note);
  if (c.library != "OpenBLAS") {
    WARN("not OpenBLAS: nothing to check");
    return;
  }
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("RELPOS_BLAS_CORE")) {
    WARN("the BLAS core is chosen by the environment here: not checked");
  } else {
    // Debian 12's OpenBLAS 0.3.21 loads "Prescott" (tier 0) on Emerald Rapids; relpos switches.
    CHECK(c.core_tier() >= std::min(c.cpu_tier, 2));
    if (c.core != c.loaded) CHECK(c.note.find("switched by relpos") != std::string::npos);
  }
  // A float32 GEMM large enough for the optimised kernels, against a float64 loop.
  const int64_t M = 67, N = 53, K = 129;
  Generator g(3);
  Tensor a = Tensor::randn({M, K}, g), b = Tensor::randn({K, N}, g);
  Tensor cmat = k::matmul(a, b);
  const std::vector<float> A = a.to_vector<float>(), B = b.to_vector<float>(), C = cmat.to_vector<float>();
  double worst = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double want = 0;
      for (int64_t e = 0; e < K; ++e) want += double(A[size_t(i * K + e)]) * double(B[size_t(e * N + j)]);
      worst = std::max(worst, std::abs(double(C[size_t(i * N + j)]) - want));
    }
  INFO("worst |float32 GEMM - float64| " << worst);
  CHECK(worst < 1e-4);
}
