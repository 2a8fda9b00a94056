// examples/train_tiny.cpp — train a tiny relpos decoder through the C++ API (no YAML, no CLI):
// build a model from a config struct, run a few AdamW steps on a toy sequence, save a
// checkpoint that `relpos_torch` / `tools/safetensors_py.py dump` can read.
//   ./train_tiny [OUT_DIR]      (default: ./tiny_run)
#include <relpos/version.h>
#include <relpos/autograd/ops.h>
#include <relpos/nn/models.h>
#include <relpos/nn/optim/adam.h>
#include <relpos/trainers/io/checkpoint.h>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  using namespace relpos;
  const std::string out = argc > 1 ? argv[1] : "tiny_run";

  nn::ModelConfig cfg;  // every field documented in nn/models.h and docs/config.md
  cfg.kind = nn::ModelKind::Decoder;
  cfg.vocab = 8;
  cfg.d_model = 32;
  cfg.n_layers = 2;
  cfg.n_heads = 4;
  cfg.d_ff = 64;
  cfg.position = "t5";
  cfg.position_params = nn::PositionParams({{"num_buckets", "8"}, {"max_distance", "16"}});
  nn::Model model(cfg, /*seed=*/42);

  // Toy data: the repeating sequence 0 1 2 .. 7 0 1 .., next-token targets.
  const int64_t B = 4, L = 16;
  std::vector<int64_t> x(B * L), y(B * L);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t) x[b * L + t] = (b + t) % 8, y[b * L + t] = (b + t + 1) % 8;
  Tensor input = Tensor::from_vector(x, {B, L}), target = Tensor::from_vector(y, {B * L});

  nn::optim::AdamW opt(model.parameters(), {.lr = 1e-2, .weight_decay = 0.01});
  double first = 0, last = 0;
  for (int step = 1; step <= 30; ++step) {
    opt.zero_grad();
    Variable logits = model.forward(input);  // [B, L, V]
    Variable loss = cross_entropy(reshape(logits, {B * L, cfg.vocab}), target);
    loss.backward();
    opt.step();
    last = loss.data().item();
    if (step == 1) first = last;
    if (step % 10 == 0) std::printf("step %2d  loss %.4f\n", step, last);
  }
  std::string dir = save_checkpoint(out, 30, {model.state_dict(), opt.state_dict(), {{"step", 30}}}, 0);
  std::printf("relpos %s: loss %.4f -> %.4f, %lld parameters, checkpoint %s\n", RELPOS_VERSION, first, last,
              static_cast<long long>(model.num_parameters()), dir.c_str());
  return last < first ? 0 : 1;
}
