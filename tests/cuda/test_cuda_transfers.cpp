// The host<->device traffic of a CUDA training step (relpos_cuda_tests; skipped without a
// GPU), counted by core/cuda_runtime.h's transfer_stats() (the debug statistic behind
// RELPOS_CUDA_STATS=1). The claim, from the code (NOTE-issue19.md, docs/backends.md): a step
// that does not log uploads each tensor of its batch once (input and target for a decoder:
// 2 h2d, staged through pinned memory, no host wait), reads back exactly once (the loss, the
// gradient norms and the device-check record in one d2h: the non-finite check and clipping
// need the norm on the host) and waits on the device nowhere else (0 syncs).
#include <catch2/catch.hpp>
#include <filesystem>

#include "core/cuda_runtime.h"
#include "kernels/ops.h"
#include "trainers/trainer.h"

using namespace relpos;
namespace fs = std::filesystem;

namespace {

std::string tmp_run(const std::string& name) {
  std::string d = (fs::temp_directory_path() / ("relpos_cuda_transfers_" + name)).string();
  fs::remove_all(d);
  return d;
}

train::TrainResult run_counted(const std::string& position, const std::string& extra, const std::string& name) {
  const std::string yaml =
      "model: {kind: decoder, d_model: 32, n_layers: 2, n_heads: 4, d_ff: 64, dropout: 0.1, "
      "max_len: 64, position: {type: " +
      position +
      "}}\n"
      "data: {task: copy, vocab_size: 8, seq_len: 6, min_len: 6, batch_size: 8}\n"
      "optim: {lr: 3.0e-3, warmup: 2" +
      extra +
      "}\n"
      "train: {device: cuda, steps: 12, log_every: 6, eval_every: 100, checkpoint_every: 100, "
      "keep_last: 0, seed: 3}\n"
      "output: {dir: " +
      tmp_run(name) + "}\n";
  train::TrainOptions opt;
  opt.cuda_stats = true;
  return train::train(train::parse_config(yaml, "cuda_transfers.yaml"), opt);
}

}  // namespace

TEST_CASE("cuda: a training step that does not log uploads its batch and reads back once", "[cuda]") {
  for (const std::string pos : {"t5", "rope", "shaw", "alibi"})
    for (const std::string extra : {"", ", clip_grad_norm: 0.0"}) {
      const train::TrainResult r = run_counted(pos, extra, pos);
      REQUIRE(r.step_transfers.size() == 12);
      // steps 1-2 build caches (position tables, optimizer state); 6 and 12 log
      for (int64_t step = 3; step <= 12; ++step) {
        if (step % 6 == 0) continue;
        const cuda::TransferStats& t = r.step_transfers[size_t(step - 1)];
        INFO(pos << extra << " step " << step << ": h2d " << t.h2d << ", d2h " << t.d2h << ", syncs " << t.syncs);
        CHECK(t.h2d == 2);    // the batch: input and target, pinned staging, queued
        CHECK(t.d2h == 1);    // loss, gradient norms and the device-check record, one read
        CHECK(t.syncs == 0);  // no other host wait
      }
    }
}

TEST_CASE("cuda: the transfer counters count copies and waits", "[cuda]") {
  cuda::synchronize();
  cuda::reset_transfer_stats();
  Tensor a = Tensor::ones({1000}).to(Device::CUDA);
  Tensor b = k::add(a, a);
  Tensor c = b.clone();  // a strided copy kernel: no transfer
  std::vector<float> v = c.to_vector<float>();
  cuda::synchronize();
  const cuda::TransferStats t = cuda::transfer_stats();
  CHECK(t.h2d == 1);
  CHECK(t.h2d_bytes == 4000);
  CHECK(t.d2h == 1);
  CHECK(t.d2h_bytes == 4000);
  CHECK(t.syncs == 1);
  CHECK(v[999] == 2.0f);
  // uploads do not wait: the source may change right after the call
  std::vector<float> host(1 << 12, 1.0f);  // within a staging buffer's first size (64 KiB): no growth
  Tensor up = Tensor::from_vector(host, {int64_t(host.size())});
  cuda::reset_transfer_stats();
  Tensor d = up.to(Device::CUDA);
  up.fill_(5.0);
  CHECK(d.to_vector<float>()[1234] == 1.0f);
  CHECK(cuda::transfer_stats().syncs == 0);
}
