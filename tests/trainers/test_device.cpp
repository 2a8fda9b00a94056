// train.device: the trainer on a machine without a GPU (the GPU side is tests/cuda/).
#include <catch2/catch.hpp>

#include <filesystem>
#include <vector>

#include "core/cuda_runtime.h"
#include "trainers/trainer.h"

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

TEST_CASE("trainer: under mpirun each rank trains on GPU local_rank mod device count", "[trainer][device]") {
  using train::cuda_device_for_rank;
  // one GPU: every rank shares it; as many ranks as GPUs: one each
  for (int r = 0; r < 4; ++r) CHECK(cuda_device_for_rank(r, 1) == 0);
  for (int r = 0; r < 8; ++r) CHECK(cuda_device_for_rank(r, 8) == r);
  // more ranks than GPUs: round-robin, every GPU gets the same number of ranks
  std::vector<int> per_gpu(8, 0);
  for (int r = 0; r < 16; ++r) ++per_gpu[size_t(cuda_device_for_rank(r, 8))];
  CHECK(per_gpu == std::vector<int>(8, 2));
  CHECK(cuda_device_for_rank(3, 3) == 0);
  CHECK(cuda_device_for_rank(5, 3) == 2);
  REQUIRE_THROWS_WITH(cuda_device_for_rank(0, 0), Contains("no CUDA device"));
  REQUIRE_THROWS_WITH(cuda_device_for_rank(-1, 2), Contains("local rank -1"));
  // a single process is local rank 0 (cuda:0)
  train::SingleProcess single;
  CHECK(single.local_rank() == 0);
}
