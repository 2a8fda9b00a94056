// Main of relpos_cuda_tests. Without a usable CUDA device it skips (exit 77, registered as
// ctest SKIP_RETURN_CODE), so a machine without a GPU reports these tests as skipped, unless
// RELPOS_REQUIRE_CUDA=1: then it fails (exit 1), printing why no device is usable (the
// cudaError_t name and message, runtime and driver versions), so a GPU check cannot pass
// with zero CUDA tests run.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/cuda_runtime.h"

int main(int argc, char** argv) {
  if (!relpos::cuda::available()) {
    const std::string why = relpos::cuda::unavailable_reason();
    const char* require = std::getenv("RELPOS_REQUIRE_CUDA");
    if (require && std::string(require) == "1") {
      std::fprintf(stderr, "RELPOS_REQUIRE_CUDA=1 but no CUDA device is usable: %s\n", why.c_str());
      return 1;
    }
    std::printf("no CUDA device (%s): skipping the CUDA tests (RELPOS_REQUIRE_CUDA=1 makes this a failure)\n",
                why.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
