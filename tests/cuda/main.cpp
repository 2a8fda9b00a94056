// Main of relpos_cuda_tests: skip (exit 77, registered as ctest SKIP_RETURN_CODE) when no
// CUDA device is present, so a machine without a GPU reports these tests as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "relpos/core/cuda_runtime.h"

int main(int argc, char** argv) {
  if (!relpos::cuda::available()) {
    std::printf("no CUDA device (%s): skipping the CUDA tests\n",
                relpos::cuda::built_with_cuda() ? "built with CUDA" : "built without CUDA support");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
