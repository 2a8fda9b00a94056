// train.device: the trainer on a machine without a GPU (the GPU side is tests/cuda/).
#include <catch2/catch.hpp>

#include <filesystem>

#include "relpos/core/cuda_runtime.h"
#include "relpos/trainers/trainer.h"

using namespace relpos;
using Catch::Contains;

TEST_CASE("trainer: train.device cuda without a GPU is a clear error before anything is written", "[trainer]") {
  if (cuda::available()) {
    SUCCEED("this machine has a CUDA device; tests/cuda/ covers training on it");
    return;
  }
  const std::string dir = (std::filesystem::temp_directory_path() / "relpos_test_device_cuda").string();
  std::filesystem::remove_all(dir);
  auto cfg = train::parse_config(
      "model: {kind: decoder, d_model: 16, n_layers: 1, n_heads: 2, d_ff: 32, max_len: 32}\n"
      "data: {task: copy, vocab_size: 8, seq_len: 6, min_len: 2, batch_size: 4}\n"
      "train: {steps: 2, device: cuda}\noutput: {dir: " + dir + "}\n",
      "device.yaml");
  REQUIRE_THROWS_WITH(train::train(cfg), Contains("train.device is 'cuda'") &&
                                             (Contains("no CUDA device") || Contains("without CUDA support")));
  CHECK_FALSE(std::filesystem::exists(dir + "/metrics.jsonl"));
}
