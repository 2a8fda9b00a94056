// bench/bench_train.cpp — training-step throughput of a relpos decoder (relpos_bench_train).
//
// Builds nn::Model (decoder, vocab 65, d_ff = 4 d_model, dropout 0, the given position
// encoding) and trains it on random tokens (seeded): every step draws a fresh batch
// tokens [B, L + 1] (input = tokens[:, :L], target = tokens[:, 1:]), then
//   forward -> cross_entropy (mean) -> backward -> clip_grad_norm(1.0) -> AdamW -> zero_grad
// exactly as trainers/trainer.cpp does (AdamW lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight
// decay --wd on the "weights" group only; norms/biases and position tables get none, the
// trainer's default no_decay). All batches are drawn before the clock starts.
// W warmup steps are run untimed, then N timed steps; one JSON line goes to stdout:
//   {"impl":"relpos", ..., "ms_per_step_median":..., "ms_per_step_mean":..., "tokens_per_s":...,
//    "peak_rss_mb":..., "rss_start_mb":..., "final_loss":..., "losses":[...]}
// tokens_per_s = B * L / median step time; peak_rss_mb from getrusage(RUSAGE_SELF).ru_maxrss;
// rss_start_mb is the resident size before the model was built (the process baseline).
// With RELPOS_OP_PROFILE=1 / RELPOS_GEMM_PROFILE=1 the tables printed at exit cover the timed
// steps only (k::restart_profiles after the warmup).
//
// --dump DIR (for bench/torch_train.py --load DIR, the cross-check): writes the initial
// parameters (params.txt: "name dims..." per line, params.bin: their float32 values in that
// order) and every batch (tokens.bin: int64 [W + N, B, L + 1]) before training.
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "kernels/ops.h"
#include "nn/models.h"
#include "nn/optim/adam.h"
#include "nn/optim/clip.h"
#include "nn/optim/param_groups.h"

using namespace relpos;

namespace {

struct Args {
  int64_t d_model = 128, n_layers = 2, n_heads = 4, seq = 128, batch = 16;
  std::string position = "none";
  int64_t warmup = 3, steps = 10;
  int threads = 1;
  uint64_t seed = 0;
  double lr = 1e-3, wd = 0.01, clip = 1.0;
  std::string dump;
  std::string device = "cpu";
  std::string attention = "fused";  // model.attention: fused | reference
  std::string precision = "fp32";   // train.precision: fp32 | bf16 (autocast over forward + loss)
};

[[noreturn]] void usage(const char* argv0, const std::string& err = "") {
  if (!err.empty()) std::fprintf(stderr, "error: %s\n", err.c_str());
  std::fprintf(
      stderr,
      "usage: %s [--d-model D] [--layers N] [--heads H] [--seq L] [--batch B] [--pos none|t5|alibi|rope|shaw]\n"
      "          [--warmup W] [--steps N] [--threads T] [--seed S] [--lr LR] [--wd WD] [--clip C] [--dump DIR] "
      "[--device cpu|cuda]\n"
      "          [--attention fused|reference] [--precision fp32|bf16]\n",
      argv0);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "-h" || k == "--help") usage(argv[0]);
    if (i + 1 >= argc) usage(argv[0], "missing value for " + k);
    std::string v = argv[++i];
    try {
      if (k == "--d-model") a.d_model = std::stoll(v);
      else if (k == "--layers") a.n_layers = std::stoll(v);
      else if (k == "--heads") a.n_heads = std::stoll(v);
      else if (k == "--seq") a.seq = std::stoll(v);
      else if (k == "--batch") a.batch = std::stoll(v);
      else if (k == "--pos") a.position = v;
      else if (k == "--warmup") a.warmup = std::stoll(v);
      else if (k == "--steps") a.steps = std::stoll(v);
      else if (k == "--threads") a.threads = std::stoi(v);
      else if (k == "--seed") a.seed = std::stoull(v);
      else if (k == "--lr") a.lr = std::stod(v);
      else if (k == "--wd") a.wd = std::stod(v);
      else if (k == "--clip") a.clip = std::stod(v);
      else if (k == "--dump") a.dump = v;
      else if (k == "--device") a.device = v;
      else if (k == "--attention") a.attention = v;
      else if (k == "--precision")
        a.precision = v;
      else usage(argv[0], "unknown option " + k);
    } catch (const std::exception&) {
      usage(argv[0], "bad value '" + v + "' for " + k);
    }
  }
  if (a.steps < 1 || a.warmup < 0 || a.threads < 1 || a.batch < 1 || a.seq < 1) usage(argv[0], "bad sizes");
  if (a.device != "cpu" && a.device != "cuda") usage(argv[0], "--device must be cpu or cuda");
  if (a.attention != "fused" && a.attention != "reference") usage(argv[0], "--attention must be fused or reference");
  // fp16 needs loss scaling (the trainer's), which this loop does not have.
  if (a.precision != "fp32" && a.precision != "bf16") usage(argv[0], "--precision must be fp32 or bf16");
  return a;
}

double current_rss_mb() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

double peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;  // Linux: kilobytes
}

template <typename T>
void write_raw(const std::string& path, const std::vector<T>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(T)));
  RELPOS_CHECK(f.good(), "cannot write {}", path);
}

nn::ModelConfig model_config(const Args& a) {
  nn::ModelConfig cfg;
  cfg.kind = relpos::nn::ModelKind::Decoder;
  cfg.vocab = 65;
  cfg.d_model = a.d_model;
  cfg.n_layers = a.n_layers;
  cfg.n_heads = a.n_heads;
  cfg.d_ff = 4 * a.d_model;
  cfg.dropout = 0.0;
  cfg.max_len = a.seq;
  cfg.position = a.position;
  cfg.attention = *parse_enum<nn::AttentionImpl>(a.attention);
  return cfg;
}

// Every step's batch up front: tokens [B, L + 1] per step, uniform over the vocabulary (all:
// the raw tokens of every step, for --dump).
struct Batches {
  std::vector<int64_t> all;
  std::vector<Tensor> inputs, targets;  // [B, L], [B L] per step, on the device
};

Batches make_batches(const Args& a, int64_t vocab, Device dev) {
  const int64_t total = a.warmup + a.steps, B = a.batch, L = a.seq;
  Generator data_gen(a.seed + 1);
  Batches bt;
  bt.all.resize(size_t(total * B * (L + 1)));
  for (auto& t : bt.all) t = int64_t(data_gen.next_u64() % uint64_t(vocab));
  for (int64_t s = 0; s < total; ++s) {
    Tensor tok = Tensor::from_vector(
        std::vector<int64_t>(bt.all.begin() + s * B * (L + 1), bt.all.begin() + (s + 1) * B * (L + 1)), {B, L + 1});
    bt.inputs.push_back(tok.narrow(1, 0, L).contiguous().to(dev));
    bt.targets.push_back(tok.narrow(1, 1, L).contiguous().reshape({-1}).to(dev));
  }
  return bt;
}

// --dump DIR: the initial parameters (params.txt: name and shape per line; params.bin: float32
// values in that order) and the tokens (tokens.bin, int64).
void dump_initial(const std::string& dir, nn::Model& model, const std::vector<int64_t>& tokens) {
  std::filesystem::create_directories(dir);
  std::ofstream names(dir + "/params.txt");
  std::vector<float> values;
  for (const auto& [name, p] : model.named_parameters()) {
    names << name;
    for (int64_t d : p.shape()) names << ' ' << d;
    names << '\n';
    std::vector<float> v = p.data().to_vector<float>();
    values.insert(values.end(), v.begin(), v.end());
  }
  write_raw(dir + "/params.bin", values);
  write_raw(dir + "/tokens.bin", tokens);
}

// Every step's loss, and the time of each step after the warmup.
struct StepTimes {
  std::vector<double> ms, losses;
};

StepTimes run_steps(const Args& a, nn::Model& model, int64_t vocab, const Batches& bt, Precision precision) {
  nn::optim::AdamOptions ao;
  ao.lr = a.lr;
  nn::optim::AdamW opt(nn::optim::param_groups_by_tag(model, a.wd), ao);
  const std::vector<Variable> params = model.parameters();
  using Clock = std::chrono::steady_clock;
  StepTimes st;
  for (int64_t s = 0; s < a.warmup + a.steps; ++s) {
    if (s == a.warmup) k::restart_profiles();  // RELPOS_OP_PROFILE / RELPOS_GEMM_PROFILE: the timed steps only
    const auto t0 = Clock::now();
    Variable loss;
    {
      AutocastGuard autocast(precision);  // the forward and the loss; backward follows the rounding
      Variable logits = model.forward(bt.inputs[size_t(s)]);
      loss = cross_entropy(reshape(logits, {-1, vocab}), bt.targets[size_t(s)]);
    }
    loss.backward();
    nn::optim::clip_grad_norm(params, a.clip);
    opt.step();
    opt.zero_grad();
    const double l = loss.item();  // reads from the device: the step's work is done
    const auto t1 = Clock::now();
    st.losses.push_back(l);
    if (s >= a.warmup) st.ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return st;
}

// The result as one JSON line on stdout.
void print_result(const Args& a, const nn::Model& model, const StepTimes& st, Precision precision, double rss_start) {
  std::vector<double> sorted = st.ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  const double mean = std::accumulate(st.ms.begin(), st.ms.end(), 0.0) / double(n);
  std::string loss_list;
  for (size_t i = 0; i < st.losses.size(); ++i) loss_list += fmt::format("{}{:.6f}", i ? "," : "", st.losses[i]);
  fmt::print(
      "{{\"impl\":\"relpos\",\"pos\":\"{}\",\"d_model\":{},\"n_layers\":{},\"n_heads\":{},\"seq\":{},\"batch\":{},"
      "\"threads\":{},\"warmup\":{},\"steps\":{},\"params\":{},\"ms_per_step_median\":{:.3f},"
      "\"ms_per_step_mean\":{:.3f},\"ms_per_step_min\":{:.3f},\"tokens_per_s\":{:.1f},\"peak_rss_mb\":{:.1f},"
      "\"rss_start_mb\":{:.1f},\"final_loss\":{:.6f},\"device\":\"{}\",\"precision\":\"{}\",\"gemm\":\"{}\","
      "\"losses\":[{}]}}\n",
      a.position, a.d_model, a.n_layers, a.n_heads, a.seq, a.batch, a.threads, a.warmup, a.steps,
      model.num_parameters(), median, mean, sorted.front(), double(a.batch * a.seq) / (median / 1000.0),
      peak_rss_mb(), rss_start, st.losses.back(), a.device, a.precision, k::cpu_gemm_path(gemm_inputs(precision)),
      loss_list);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  k::set_num_threads(a.threads);
  const double rss_start = current_rss_mb();
  const nn::ModelConfig cfg = model_config(a);
  const Precision precision = *parse_enum<Precision>(a.precision);
  nn::Model model(cfg, a.seed);
  const Device dev = a.device == "cuda" ? Device::CUDA : Device::CPU;
  model.to(dev);
  model.train();
  const Batches bt = make_batches(a, cfg.vocab, dev);
  if (!a.dump.empty()) dump_initial(a.dump, model, bt.all);
  const StepTimes st = run_steps(a, model, cfg.vocab, bt, precision);
  print_result(a, model, st, precision, rss_start);
  return 0;
}
