// CUDA tests: built into relpos_cuda_tests, which exits with the ctest skip code when the
// machine has no CUDA device (see tests/cuda/main.cpp).
#include <catch2/catch.hpp>

#include "core/tensor.h"

using namespace relpos;

TEST_CASE("cuda: host -> device -> host round trip is exact", "[cuda]") {
  Generator g(1);
  Tensor x = Tensor::randn({3, 5}, g);
  Tensor d = x.to(Device::CUDA);
  REQUIRE(d.device() == Device::CUDA);
  REQUIRE(d.to(Device::CPU).to_vector<float>() == x.to_vector<float>());
  Tensor t = x.transpose(0, 1).to(Device::CUDA);  // non-contiguous source is packed first
  REQUIRE(t.to(Device::CPU).to_vector<float>() == x.transpose(0, 1).contiguous().to_vector<float>());
}
