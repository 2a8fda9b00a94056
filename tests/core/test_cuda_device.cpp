// CUDA build switch and device enum. Tests tagged [cuda] need a GPU and skip cleanly
// without one; the no-GPU behaviour is tested everywhere.
#include <catch2/catch.hpp>

#include "relpos/core/cuda_runtime.h"
#include "relpos/core/tensor.h"

using namespace relpos;
using Catch::Contains;

TEST_CASE("cuda: without a device, allocation fails with a clear message", "[core]") {
  if (cuda::available()) {
    SUCCEED("a CUDA device is present; covered by the [cuda] round-trip test");
    return;
  }
  REQUIRE(cuda::device_count() == 0);
  REQUIRE_THROWS_WITH(Tensor::zeros({2}, DType::F32, Device::CUDA),
                      Contains("no CUDA device") || Contains("built without CUDA support"));
}
