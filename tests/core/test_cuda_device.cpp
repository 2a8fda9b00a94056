// CUDA build switch and device enum. Tests tagged [cuda] need a GPU and skip cleanly
// without one; the no-GPU behaviour is tested everywhere.
#include <catch2/catch.hpp>

#include "../helpers.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"
#include "kernels/ops.h"
#include "tests/cli_run.h"

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

TEST_CASE("cuda: cpu and cuda error texts compare equal up to the device they name", "[core]") {
  // The text the cuda_kernels "bad inputs" case compares: the CPU's int64 division by zero,
  // and the same error as the CUDA backend raises it (describe() names cuda there).
  std::string cpu;
  try {
    k::div(Tensor::from_vector<int64_t>({4, 4}, {2}), Tensor::from_vector<int64_t>({1, 0}, {2}));
  } catch (const std::exception& e) {
    cpu = e.what();
  }
  REQUIRE_THAT(cpu, Contains("division by zero") && Contains("int64 [2] on cpu"));
  std::string cuda = cpu;
  for (size_t at; (at = cuda.find("on cpu")) != std::string::npos;) cuda.replace(at, 6, "on cuda");
  REQUIRE(cpu != cuda);  // a plain comparison can never pass on a GPU
  CHECK(test::without_device_names(cpu) == test::without_device_names(cuda));
  CHECK_THAT(test::without_device_names(cpu), Contains("int64 [2] on <device> / int64 [2] on <device>"));
  // only the device is ignored: another shape, dtype or op still differs
  std::string other = cuda;
  other.replace(other.find("[2]"), 3, "[3]");
  CHECK(test::without_device_names(cpu) != test::without_device_names(other));
  // whole words only
  CHECK(test::without_device_names("precision cpu; on cpus; on cuda.") == "precision cpu; on cpus; on <device>.");
}

TEST_CASE("cuda: without a device, unavailable_reason() says why (CUDA error, runtime and driver)", "[core]") {
  if (cuda::available()) {
    CHECK(cuda::unavailable_reason().empty());
    return;
  }
  const std::string why = cuda::unavailable_reason();
  INFO(why);
  if (!cuda::built_with_cuda()) {
    CHECK_THAT(why, Contains("built without CUDA support"));
    return;
  }
  // e.g. "cudaGetDeviceCount failed: cudaErrorInsufficientDriver (CUDA driver version is
  // insufficient for CUDA runtime version); CUDA runtime 13.0, driver none"
  CHECK_THAT(why, Contains("cudaGetDeviceCount"));
  CHECK_THAT(why, Contains(cuda::runtime_version()));
  CHECK_THAT(why, Contains("CUDA runtime") && Contains("driver"));
  if (why.find("found no device") == std::string::npos) CHECK_THAT(why, Contains("cudaError"));
  // the allocation error carries it
  REQUIRE_THROWS_WITH(Tensor::zeros({2}, DType::F32, Device::CUDA), Contains("no CUDA device (" + why + ")"));
}

TEST_CASE("cuda: cuBLAS is loaded on first use, not linked: a CPU run does not carry it (~150 MB resident)", "[core]") {
  // kernels/cuda/cublas_loader.cuh: linking libcublas cost every process ~150 MB of resident
  // memory before main(). The CLI must not name it among its needed libraries; `relpos info`
  // still loads it and reports its version in a CUDA build.
  const auto needed = test::shell_run("readelf -d " + test::shell_quote(RELPOS_CLI_PATH));
  REQUIRE(needed.code == 0);
  CHECK(needed.out.find("(NEEDED)") != std::string::npos);  // readelf read the dynamic section
  CHECK(needed.out.find("libcublas") == std::string::npos);
  const auto info = test::cli_run("info");
  REQUIRE(info.code == 0);
  if (cuda::built_with_cuda()) CHECK(info.out.find("cuBLAS 1") != std::string::npos);  // "cuBLAS 13.1.0"
}
