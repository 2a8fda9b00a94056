// CUDA end-to-end tests (relpos_cuda_tests; skipped without a GPU): the dispatch layer's
// mixed-device error, Module::to, every position encoding's training step on the GPU against
// the CPU, the trainer with train.device: cuda (loss curve vs the CPU, bit-exact resume on
// the device, checkpoints that reload on the CPU).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include "autograd/ops.h"
#include "kernels/ops.h"
#include "nn/models.h"
#include "nn/optim/adam.h"
#include "nn/optim/clip.h"
#include "nn/optim/param_groups.h"
#include "nn/positional/registry.h"
#include "trainers/io/checkpoint.h"
#include "trainers/trainer.h"

using namespace relpos;
namespace fs = std::filesystem;

namespace {

std::string tmp_run(const std::string& name) {
  std::string d = (fs::temp_directory_path() / ("relpos_cuda_test_" + name)).string();
  fs::remove_all(d);
  return d;
}

// Losses of `steps` AdamW steps of a tiny decoder with position encoding `pos` on `dev`.
std::vector<double> train_steps(const std::string& pos, Device dev, int steps) {
  nn::ModelConfig cfg;
  cfg.kind = nn::ModelKind::Decoder;
  cfg.vocab = 11;
  cfg.d_model = 32;
  cfg.n_layers = 2;
  cfg.n_heads = 4;
  cfg.d_ff = 64;
  cfg.dropout = 0.1;
  cfg.max_len = 32;
  cfg.position = pos;
  nn::Model model(cfg, 5);
  model.to(dev);
  model.train();
  nn::optim::AdamOptions ao;
  ao.lr = 3e-3;
  nn::optim::AdamW opt(nn::optim::param_groups_by_tag(model, 0.01), ao);
  Generator data(1), drop(2);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    std::vector<int64_t> tok(2 * 17);
    for (auto& t : tok) t = int64_t(data.next_u64() % 11);
    Tensor all = Tensor::from_vector(tok, {2, 17});
    Tensor in = all.narrow(1, 0, 16).contiguous().to(dev), tg = all.narrow(1, 1, 16).contiguous().reshape({-1}).to(dev);
    Variable logits = model.forward(in, Tensor(), &drop);
    Variable loss = cross_entropy(reshape(logits, {-1, 11}), tg);
    loss.backward();
    nn::optim::clip_grad_norm(model.parameters(), 1.0);
    opt.step();
    opt.zero_grad();
    losses.push_back(loss.item());
  }
  return losses;
}

}  // namespace

TEST_CASE("cuda: ops refuse inputs on two devices, naming the op and both tensors", "[cuda]") {
  Tensor a = Tensor::ones({2, 3}), b = Tensor::ones({3, 4}).to(Device::CUDA);
  CHECK_THROWS_WITH(k::matmul(a, b), Catch::Contains("matmul: inputs on different devices") &&
                                         Catch::Contains("on cpu") && Catch::Contains("on cuda"));
  CHECK_THROWS_WITH(k::add(a, Tensor::ones({2, 3}).to(Device::CUDA)), Catch::Contains("different devices"));
}

TEST_CASE("cuda: Module::to moves parameters and buffers both ways", "[cuda]") {
  nn::ModelConfig cfg;
  cfg.vocab = 7;
  cfg.d_model = 16;
  cfg.n_layers = 1;
  cfg.n_heads = 2;
  cfg.d_ff = 32;
  cfg.max_len = 16;
  cfg.position = "alibi";  // fixed slopes are a buffer
  nn::Model m(cfg, 1);
  auto before = m.state_dict();
  m.to(Device::CUDA);
  for (auto& [n, t] : m.state_dict()) REQUIRE(t.device() == Device::CUDA);
  m.to(Device::CPU);
  auto after = m.state_dict();
  for (size_t i = 0; i < before.size(); ++i)
    REQUIRE(before[i].second.to_vector<double>() == after[i].second.to_vector<double>());
}

TEST_CASE("cuda: every position encoding trains like on the CPU (10 AdamW steps, dropout on)", "[cuda]") {
  for (const nn::PositionVariant& v : nn::position_variants()) {
    const std::string& pos = v.name;
    // relative_2d, graph_spd need a structured task, ast a token file with syntax trees
    if (!v.causal_capable || pos == "relative_2d" || pos == "graph_spd" || !v.facts.position_channels.empty()) continue;
    INFO(pos);
    auto cpu = train_steps(pos, Device::CPU, 10), gpu = train_steps(pos, Device::CUDA, 10);
    for (size_t i = 0; i < cpu.size(); ++i) CHECK(std::abs(cpu[i] - gpu[i]) <= 1e-4 * std::abs(cpu[i]));
  }
}

TEST_CASE("cuda: trainer with train.device cuda: loss curve, resume on the device, eval on the CPU", "[cuda]") {
  std::string yaml = R"(model: {kind: decoder, d_model: 32, n_layers: 2, n_heads: 4, d_ff: 64, dropout: 0.1, max_len: 64,
        position: {type: t5}}
data: {task: copy, vocab_size: 8, seq_len: 6, min_len: 2, batch_size: 8}
optim: {lr: 3.0e-3, warmup: 5}
train: {steps: 20, eval_every: 10, eval_batches: 2, log_every: 5, checkpoint_every: 10, keep_last: 0, seed: 7}
)";
  auto cfg_for = [&](const std::string& dir) {
    return train::parse_config(yaml + "output: {dir: " + dir + "}\n", "cuda_test.yaml");
  };
  auto cpu_cfg = cfg_for(tmp_run("cpu"));
  auto gpu_dir = tmp_run("gpu");
  auto gpu_cfg = cfg_for(gpu_dir);
  gpu_cfg.train.device = Device::CUDA;
  auto cpu = train::train(cpu_cfg), gpu = train::train(gpu_cfg);
  REQUIRE(cpu.losses.size() == gpu.losses.size());
  for (size_t i = 0; i < cpu.losses.size(); ++i) CHECK(std::abs(cpu.losses[i] - gpu.losses[i]) <= 1e-3 * cpu.losses[i]);
  // resume on the device from step 10: bit-identical to the uninterrupted GPU run
  std::string resumed_dir = tmp_run("gpu_resumed");
  fs::create_directories(resumed_dir + "/checkpoints");
  fs::copy(checkpoint_dir(gpu_dir, 10), checkpoint_dir(resumed_dir, 10), fs::copy_options::recursive);
  auto rcfg = cfg_for(resumed_dir);
  rcfg.train.device = Device::CUDA;
  train::TrainOptions opt;
  opt.resume = resumed_dir;
  auto resumed = train::train(rcfg, opt);
  std::vector<double> tail(gpu.losses.begin() + 10, gpu.losses.end());
  CHECK(resumed.losses == tail);
  // the GPU-trained checkpoint evaluates on the CPU
  train::LoadedRun run = train::load_run(gpu_dir);
  CHECK(run.model->device() == Device::CPU);
  CHECK(std::isfinite(train::evaluate(*run.model, *run.data, run.cfg).loss));
}
