#include "trainers/trainer.h"
#include "core/env.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/cuda_runtime.h"
#include "kernels/ops.h"
#include "nn/optim/adam.h"
#include "nn/optim/clip.h"
#include "nn/optim/loss_scale.h"
#include "nn/optim/param_groups.h"
#include "nn/optim/schedule.h"
#include "nn/optim/sgd.h"
#include "nn/stability.h"
#include "trainers/data/data_tasks.h"
#include "trainers/data/segments.h"
#include "trainers/dist/data_parallel.h"
#include "trainers/io/checkpoint.h"
#include "trainers/io/file_io.h"
#include "trainers/limits.h"
#include "trainers/metrics.h"

namespace fs = std::filesystem;

namespace relpos::train {

namespace {

using Clock = std::chrono::steady_clock;

nlohmann::json rng_json(const GeneratorState& s) { return {{"seed", s.seed}, {"offset", s.offset}}; }

}  // namespace

std::unique_ptr<nn::optim::Optimizer> make_optimizer(const nn::Model& m, const OptimConfig& o) {
  auto groups = nn::optim::param_groups_by_tag(m, o.weight_decay, o.no_decay);
  const nn::optim::AdamOptions a{.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps};
  switch (o.name) {
    case nn::optim::OptimizerKind::SGD:
      return std::make_unique<nn::optim::SGD>(std::move(groups), nn::optim::SGDOptions{o.lr, o.momentum});
    case nn::optim::OptimizerKind::Adam:
      return std::make_unique<nn::optim::Adam>(std::move(groups), a);
    case nn::optim::OptimizerKind::AdamW:
      return std::make_unique<nn::optim::AdamW>(std::move(groups), a);
  }
  fail("optim.name: unknown optimizer");
}

namespace {

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(const std::string& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    if (i + 1 < in.size()) v |= uint32_t(uint8_t(in[i + 1])) << 8;
    if (i + 2 < in.size()) v |= uint32_t(uint8_t(in[i + 2]));
    out += kBase64[(v >> 18) & 63];
    out += kBase64[(v >> 12) & 63];
    out += i + 1 < in.size() ? kBase64[(v >> 6) & 63] : '=';
    out += i + 2 < in.size() ? kBase64[v & 63] : '=';
  }
  return out;
}

// Strict: length a multiple of 4, only the alphabet, '=' only as the final padding.
bool base64_decode(const std::string& in, std::string& out) {
  if (in.size() % 4 != 0) return false;
  auto val = [](char c) -> int {
    const char* p = std::strchr(kBase64, c);
    return c != '\0' && p ? int(p - kBase64) : -1;
  };
  for (size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    const int pad = last ? (in[i + 3] == '=') + (in[i + 2] == '=') : 0;
    if (pad == 1 && in[i + 2] == '=') return false;
    int v[4];
    for (int k = 0; k < 4 - pad; ++k)
      if ((v[k] = val(in[i + k])) < 0) return false;
    for (int k = 4 - pad; k < 4; ++k) v[k] = 0;
    const uint32_t w = uint32_t(v[0]) << 18 | uint32_t(v[1]) << 12 | uint32_t(v[2]) << 6 | uint32_t(v[3]);
    out += char((w >> 16) & 0xFF);
    if (pad < 2) out += char((w >> 8) & 0xFF);
    if (pad < 1) out += char(w & 0xFF);
  }
  return true;
}

}  // namespace

SavedState parse_state(const nlohmann::json& j, const std::string& ck) {
  const std::string file = ck + "/trainer_state.json";
  auto need = [&](const char* key) -> const nlohmann::json& {
    if (!j.contains(key)) fail("trainer state '{}': key '{}' is missing", file, key);
    return j.at(key);
  };
  auto count = [&](const nlohmann::json& v, const std::string& key) {
    if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0))
      fail("trainer state '{}': '{}' must be a non-negative integer, got {}", file, key, v.dump());
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
      fail("trainer state '{}': '{}' is out of range: {}", file, key, v.dump());
    return v.get<int64_t>();
  };
  auto rng = [&](const char* key) {
    const nlohmann::json& r = need(key);
    if (!r.is_object() || !r.contains("seed") || !r.contains("offset") || !r["seed"].is_number_unsigned() ||
        !r["offset"].is_number_unsigned())
      fail("trainer state '{}': '{}' must be {{\"seed\": N, \"offset\": N}} (non-negative integers), got {}", file,
           key, r.dump());
    return GeneratorState{r["seed"].get<uint64_t>(), r["offset"].get<uint64_t>()};
  };
  SavedState s;
  s.step = count(need("step"), "step");
  s.skipped = j.contains("skipped_steps") ? count(j["skipped_steps"], "skipped_steps") : 0;
  if (j.contains("loss_scale")) {  // train.precision fp16
    const nlohmann::json& v = j["loss_scale"];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
      fail("trainer state '{}': 'loss_scale' must be a finite number > 0, got {}", file, v.dump());
    s.loss_scale = v.get<double>();
    s.loss_scale_good_steps = count(need("loss_scale_good_steps"), "loss_scale_good_steps");
    s.overflow_steps = count(need("overflow_steps"), "overflow_steps");
  }
  s.data_rng = rng("data_rng");
  s.dropout_rng = rng("dropout_rng");
  const nlohmann::json& y = need("config_yaml");
  if (!y.is_string()) fail("trainer state '{}': 'config_yaml' must be a string", file);
  s.config_yaml = y.get<std::string>();
  if (j.contains("world_size")) {
    s.world_size = count(j["world_size"], "world_size");
    if (s.world_size < 1 || s.world_size > (1 << 20))
      fail("trainer state '{}': 'world_size' must be in [1, 2^20], got {}", file, s.world_size);
  }
  if (j.contains("vocab")) {
    const nlohmann::json& v = j["vocab"];
    if (!v.is_array()) fail("trainer state '{}': 'vocab' must be a list of strings", file);
    std::set<std::string> seen;
    for (const auto& e : v) {
      if (!e.is_string() || e.get<std::string>().empty() || !seen.insert(e.get<std::string>()).second)
        fail("trainer state '{}': 'vocab' must hold distinct non-empty strings, got {}", file, e.dump());
      s.vocab.push_back(e.get<std::string>());
    }
  }
  if (j.contains("vocab_size")) {
    s.vocab_size = count(j["vocab_size"], "vocab_size");
    if (s.vocab_size < 2 || s.vocab_size > (int64_t(1) << 24))
      fail("trainer state '{}': 'vocab_size' must be in [2, 2^24], got {}", file, s.vocab_size);
  }
  if (j.contains("tokenizer")) {  // {"library", "options", "model_base64"}
    const nlohmann::json& t = j["tokenizer"];
    if (!t.is_object() || !t.contains("model_base64") || !t["model_base64"].is_string() ||
        !base64_decode(t["model_base64"].get<std::string>(), s.tokenizer_model) || s.tokenizer_model.empty())
      fail("trainer state '{}': 'tokenizer' must be an object whose 'model_base64' is a non-empty base64 string", file);
  }
  return s;
}

Config saved_config(const SavedState& st, const std::string& ck) {
  try {
    return parse_config(st.config_yaml, ck + "/trainer_state.json (config_yaml)");
  } catch (const ConfigError& e) {
    fail("checkpoint '{}' holds an invalid config: {}", ck, e.what());
  }
}

namespace {

// Upper bound on the bytes of an optimizer state for `model_like` (Adam: two moments per
// parameter, stored as float64 at most, plus step counters).
uint64_t optimizer_bytes_bound(const NamedTensors& model_like) {
  uint64_t n = 0;
  for (const auto& [name, t] : model_like) n += uint64_t(t.numel());
  return n * 2 * 8 + 8 * (model_like.size() + 16) * 4 + (1u << 20);
}

// Cross-entropy of the model on a batch; logits [B, L, V] flattened against targets.
// With z_coef > 0 the z-loss term z_coef * mean(logsumexp(logits)^2) is returned in *z
// (nn/stability.h); the caller adds it to the loss it differentiates, not to the logged one.
Variable batch_loss(const nn::Model& m, const Batch& b, Generator* gen, std::vector<nn::AttentionStats>* stats,
                    double z_coef = 0.0, Variable* z = nullptr, nn::SegmentMemory* mem = nullptr) {
  Variable logits = mem ? m.forward_with_memory(b.input, *mem, gen, stats)  // Transformer-XL segments
                        : m.logits(b.model_input(), gen, stats);
  const int64_t V = logits.size(-1);
  if (z_coef > 0 && z) *z = nn::z_loss(logits) * z_coef;
  return cross_entropy(reshape(logits, {-1, V}), b.target.reshape({-1}), kIgnore);
}

// First parameter whose gradient holds NaN/Inf ("" if none). Only called once the global
// norm came out non-finite: one device reduction and host read per parameter.
std::string first_nonfinite_grad(const nn::Model& m) {
  for (const auto& [name, p] : m.named_parameters()) {
    if (!p.grad().defined()) continue;
    if (!std::isfinite(k::sum_squares(p.grad()).item())) return name;
  }
  return "";
}

// The layer a parameter belongs to: its name up to the first index ("decoder.blocks.3"), or
// its first component when it has none ("embed", "head").
std::string layer_of(const std::string& name) {
  size_t start = 0;
  while (start < name.size()) {
    const size_t dot = name.find('.', start);
    const std::string part = name.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!part.empty() && part.find_first_not_of("0123456789") == std::string::npos)
      return name.substr(0, dot == std::string::npos ? name.size() : dot);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return name.substr(0, name.find('.'));
}

// How many gradient values are NaN or ±inf per layer, as "layer=count ..." (layers with none
// left out), for the metrics row of a step whose gradients are non-finite (an fp16 overflow, a
// skipped step): the layers where the backward overflowed. One device reduction and read per
// parameter; those steps only.
std::string nonfinite_grads_by_layer(const nn::Model& m) {
  std::vector<std::pair<std::string, int64_t>> counts;
  for (const auto& [name, p] : m.named_parameters()) {
    if (!p.grad().defined()) continue;
    const Tensor& g = p.grad();
    const int64_t bad = g.numel() - int64_t(k::sum(nn::finite_mask(k::unary(k::Unary::Abs, g))).item());
    if (bad == 0) continue;
    const std::string layer = layer_of(name);
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == layer; });
    if (it == counts.end()) it = counts.insert(counts.end(), {layer, 0});
    it->second += bad;
  }
  std::string out;
  for (const auto& [layer, n] : counts) out += fmt::format("{}{}={}", out.empty() ? "" : " ", layer, n);
  return out;
}

std::string bar(int64_t step, int64_t total, double loss, double lr, double tok_s, double eta_s) {
  const int width = 24;
  int filled = int(double(step) / double(total) * width);
  return fmt::format("\r[{}{}] {}/{} loss {:.4f} lr {:.2e} {:.0f} tok/s ETA {:.0f}s ", std::string(size_t(filled), '#'),
                     std::string(size_t(width - filled), '.'), step, total, loss, lr, tok_s, eta_s);
}

void check_same_model(const Config& a, const Config& b, const std::string& ckpt) {
  auto same = [](const nn::ModelConfig& x, const nn::ModelConfig& y) {
    return x.kind == y.kind && x.d_model == y.d_model && x.n_layers == y.n_layers && x.n_heads == y.n_heads &&
           x.d_ff == y.d_ff && x.position == y.position && x.position_params.items() == y.position_params.items() &&
           x.norm == y.norm && x.norm_type == y.norm_type && x.max_len == y.max_len;
  };
  RELPOS_CHECK_CONFIG(same(a.model, b.model) && a.data.task == b.data.task,
                      "--resume {}: the config's model/data.task differ from the checkpoint's; resume with the "
                      "run's own config ({}/config.yaml)",
                      ckpt, fs::path(ckpt).parent_path().parent_path().string());
}

// The run directory of a checkpoint <run>/checkpoints/step_N (empty if not laid out so).
std::string run_of_checkpoint(const std::string& ck) {
  fs::path p = fs::path(ck).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  if (p.parent_path().filename() != "checkpoints") return "";
  return p.parent_path().parent_path().string();
}

// A directory that exists and holds anything but the lock file of an earlier run and a subword
// token cache (data/: a start that stopped after encoding its text leaves it; it is reused when its
// key matches, docs/data.md).
bool non_empty_dir(const std::string& d) {
  std::error_code ec;
  if (!fs::exists(d, ec)) return false;
  if (!fs::is_directory(d, ec)) fail_config("output.dir '{}' exists and is not a directory", d);
  for (const auto& e : fs::directory_iterator(d, ec))
    if (e.path().filename() != DirLock::kFileName && e.path().filename() != "data") return true;
  return false;
}

// output.dir inside another run's checkpoints/ would make that run unloadable (a folder that
// is not a complete checkpoint among its step_N): refused, naming the run.
void check_not_inside_a_run(const std::string& run_dir) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(run_dir, ec), ec);
  if (ec) return;
  for (fs::path a = p.parent_path(); !a.empty() && a != a.root_path(); a = a.parent_path())
    if (a.filename() == "checkpoints" &&
        (fs::exists(a.parent_path() / "config.yaml", ec) || fs::exists(a.parent_path() / "metrics.jsonl", ec)))
      fail_config("output.dir '{}' is inside the checkpoints of the run {}; writing there would leave that run "
                  "unloadable: choose a directory outside it", run_dir, a.parent_path().string());
}

std::string resolve_checkpoint(const std::string& dir) {
  RELPOS_CHECK(fs::exists(dir), "'{}' does not exist", dir);
  if (fs::exists(fs::path(dir) / "trainer_state.json")) return dir;
  auto latest = latest_checkpoint(dir);
  RELPOS_CHECK(latest.has_value(), "'{}' holds no checkpoint (expected {}/checkpoints/step_*/)", dir, dir);
  return *latest;
}

}  // namespace

// The batch on `device` (data is produced on the host; one transfer per tensor).
Batch to_device(Batch b, Device device) {
  if (device == Device::CPU) return b;
  for (Tensor* t : {&b.input, &b.target, &b.dec_input, &b.padding, &b.position_index, &b.positions})
    if (t->defined()) *t = t->to(device);
  return b;
}

int cuda_device_for_rank(int local_rank, int device_count) {
  RELPOS_CHECK(device_count >= 1, "cuda_device_for_rank: no CUDA device (device count {})", device_count);
  RELPOS_CHECK(local_rank >= 0, "cuda_device_for_rank: local rank {} is negative", local_rank);
  return local_rank % device_count;
}

// The training device; for cuda, makes this rank's GPU (cuda_device_for_rank) the current one
// before anything is allocated on it.
Device train_device(const Config& cfg, int local_rank) {
  if (cfg.train.device == Device::CPU) return Device::CPU;
  check_device_usable(cfg.train.device);
  cuda::set_device(cuda_device_for_rank(local_rank, cuda::device_count()));
  return Device::CUDA;
}

EvalResult evaluate(const nn::Model& model, const Dataset& data, const Config& cfg, int64_t seq_len) {
  NoGradGuard ng;
  EvalResult r;
  r.seq_len = seq_len > 0 ? seq_len : cfg.data.seq_len;
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < cfg.train.eval_batches; ++i) {
    Batch b = to_device(data.val_batch(i, r.seq_len), model.device());
    Variable logits = model.logits(b.model_input());
    const int64_t V = logits.size(-1);
    Tensor flat = logits.data().reshape({-1, V});
    Tensor tg = b.target.reshape({-1});
    k::CrossEntropyOut ce = k::cross_entropy(flat, tg, kIgnore, k::Reduction::Sum);
    loss_sum += ce.loss.item();
    r.tokens += ce.counted();  // on cuda a read of the device count (evaluation is not a training step)
    // Accuracy on the device: a row counts when its target's logit is the row maximum.
    const Device dev = flat.device();
    Tensor valid = k::binary(k::Binary::Ne, tg, Tensor::scalar(double(kIgnore), DType::I64, dev));  // [N] 1/0
    Tensor safe_t = k::where(valid, tg, Tensor::scalar(0.0, DType::I64, dev)).unsqueeze(1);         // [N, 1]
    Tensor hit = k::binary(k::Binary::Ge, k::gather(flat, 1, safe_t),
                           k::reduce(k::Reduce::Max, flat, {1}, true));  // [N, 1] 1/0
    correct += int64_t(std::llround(k::sum(k::mul(hit.squeeze(1), valid.to(flat.dtype()))).item()));
  }
  RELPOS_CHECK(r.tokens > 0, "evaluation found no target tokens");
  r.loss = loss_sum / double(r.tokens);
  r.perplexity = std::exp(r.loss);
  r.accuracy = double(correct) / double(r.tokens);
  return r;
}

namespace {

// Before a checkpoint's model is built: the model its config describes (the vocabulary, the
// sizes) must be one that model.safetensors can hold, so a damaged or forged checkpoint (a
// huge vocabulary, say) is refused before gigabytes are allocated for its shape error.
void check_checkpoint_size(const std::string& checkpoint, const Config& cfg, int64_t vocab) {
  const ResourceEstimate e = estimate_resources(cfg, vocab);
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(fs::path(checkpoint) / kModelFile, ec);
  if (ec) return;  // the loader names the missing file
  // float32 tensors: 4 bytes per parameter; the estimate is an upper bound (within 2x)
  RELPOS_CHECK(uintmax_t(e.parameters) <= bytes,
               "{}: its config describes a model of about {} parameters (vocabulary {}, model.d_model {}, "
               "model.n_layers {}), but {} holds {} bytes: the checkpoint is damaged or its trainer_state.json does "
               "not belong to its tensors",
               checkpoint, e.parameters, vocab, cfg.model.d_model, cfg.model.n_layers, kModelFile, bytes);
}

}  // namespace

namespace {

// The log window: what the metrics row of the next logged step averages over.
struct LogWindow {
  double loss = 0, z = 0;
  int64_t steps = 0, tokens = 0;
  double comm_s = 0;  // data-parallel: seconds in the step rendezvous + gradient all-reduce
  Clock::time_point t0 = Clock::now();
};

// One step's forward and backward over its micro-batches (and ranks).
struct StepLoss {
  double loss = 0, z = 0;                 // training loss and z-loss, means over the micro-batches
  std::vector<nn::AttentionStats> stats;  // attention statistics of the first micro-batch (log steps)
  // Single process: the sums over the micro-batches of loss * w and z * w, float64 [] on the
  // device, read with the gradient norms in one transfer (Trainer::read_step); loss and z are
  // set then. Data-parallel: undefined (the sums went through the collective on the host).
  Tensor loss_t, z_t;
};

// The values a step reads back from the device, all in one transfer.
struct StepValues {
  double norm = 0, pos_norm = 0;  // global gradient norm (non-finite check, clipping), position params'
};

// train() in named phases. The constructor validates and builds everything (the resumed
// state, the data, the model, the memory estimate, the checkpoint tensors) and writes
// nothing; run() opens the run directory, then runs each step: forward_backward ->
// non-finite check (skip or abort) -> update -> log (with evaluation) -> checkpoint.
class Trainer {
 public:
  Trainer(const Config& cfg, const TrainOptions& topt);
  TrainResult run();

 private:
  void say(const std::string& s) const {
    if (topt_.log && dp_.is_root()) topt_.log(s);  // rank 0 speaks for the job
  }
  void log_metrics(int64_t step, const nlohmann::ordered_json& row) {
    if (metrics_) metrics_->log(step, row);
  }
  void read_resume_state();
  void build();
  void restore();
  void open_run_dir();
  void announce() const;
  void step(int64_t step);
  StepLoss forward_backward(int64_t step, bool log_step);
  StepValues read_step(StepLoss& sl);
  void monitor_divergence(int64_t step, double loss);
  void skip_step(int64_t step, const std::string& bad, double loss);
  void overflow_step(int64_t step, double loss);
  [[noreturn]] void abort_step(int64_t step, const std::string& bad, double loss, const GeneratorState& data_rng0,
                               const GeneratorState& dropout_rng0);
  bool good_state(const std::string& checkpoint, std::string& why);
  std::string newest_good_state(int64_t upto, std::vector<std::string>& rejected);
  void log_window(int64_t step, double lr, double norm, double pos_norm, const std::vector<nn::AttentionStats>& stats,
                  bool eval_step);
  void maybe_checkpoint(int64_t step);
  std::string save(int64_t step, const GeneratorState& data_rng, const GeneratorState& dropout_rng);

  const TrainOptions& topt_;
  SingleProcess single_;
  DataParallel dp_;
  Config cfg_;
  const Clock::time_point t0_ = Clock::now();
  // read_resume_state
  std::optional<SavedState> st_;
  std::string ck_path_, run_dir_;
  // build
  std::unique_ptr<Dataset> data_;
  std::unique_ptr<nn::Model> model_;
  Device device_ = Device::CPU;
  std::unique_ptr<nn::optim::Optimizer> opt_;
  Generator data_gen_, dropout_gen_;
  nn::optim::ScheduleOptions sched_;
  std::vector<Variable> params_, pos_params_;
  std::vector<std::pair<std::string, Variable>> alphas_;  // learnable bias scales, logged
  // Transformer-XL segment training (model.mem_len > 0): consecutive segments per batch row,
  // with the detached memory of the previous segments. A resumed run starts new streams.
  std::unique_ptr<SegmentStream> segments_;
  nn::SegmentMemory memory_;
  // open_run_dir (rank 0)
  std::optional<DirLock> run_lock_;
  std::optional<MetricsWriter> metrics_;
  // the loop
  int64_t start_ = 0, skipped_ = 0;
  // train.precision fp16: dynamic loss scaling; overflow steps are skipped and counted
  std::optional<nn::optim::LossScaler> scaler_;
  int64_t overflow_steps_ = 0;
  TrainResult res_;
  const bool stats_ = topt_.cuda_stats || env_value("RELPOS_CUDA_STATS") == "1";
  LogWindow window_;
  double run_min_ = std::numeric_limits<double>::infinity();  // running minimum of the training loss
  int64_t last_saved_ = -1;
  // The last step whose update was applied: the parameters after it are those of every later
  // step up to now (skipped and fp16-overflow steps change nothing), so every checkpoint of a
  // step in [last_update_, now) holds the very state a non-finite loss now comes from.
  int64_t last_update_ = 0;
  std::string last_saved_path_;
};

Trainer::Trainer(const Config& cfg, const TrainOptions& topt)
    : topt_(topt), dp_(topt.comm ? *topt.comm : single_, cfg), cfg_(cfg), memory_(cfg.model.mem_len) {
  if (cfg_.train.threads > 0) k::set_num_threads(int(cfg_.train.threads));
  read_resume_state();
  build();
  if (st_) restore();
  // Every rank validated the same config and data (a collective: nobody writes before all
  // have checked), and the replicas start from the same bits.
  if (dp_.active()) {
    dp_.check_same_config(cfg_, data_->vocabulary());
    dp_.check_parameters(*model_, start_, /*force=*/true);
  }
}

// --resume: the checkpoint's state, validated, and the run it belongs to (which this run
// continues in); without it, a non-empty output.dir is refused unless --overwrite.
void Trainer::read_resume_state() {
  run_dir_ = cfg_.output_dir;
  if (topt_.resume) {
    ck_path_ = resolve_checkpoint(*topt_.resume);
    st_ = parse_state(load_checkpoint_state(ck_path_), ck_path_);
    check_same_model(cfg_, saved_config(*st_, ck_path_), ck_path_);
    RELPOS_CHECK_CONFIG(st_->step < cfg_.train.steps,
                        "--resume: checkpoint is at step {}, train.steps is {}: nothing to do", st_->step,
                        cfg_.train.steps);
    // --resume writes into the run it resumes, whatever output.dir says.
    const std::string resumed_run = run_of_checkpoint(ck_path_);
    RELPOS_CHECK_CONFIG(!resumed_run.empty(),
                        "--resume {}: '{}' is not inside a run directory (<run>/checkpoints/step_N)", *topt_.resume,
                        ck_path_);
    std::error_code ec;
    if (!fs::equivalent(resumed_run, run_dir_, ec))
      say(fmt::format("note: --resume writes into the resumed run {} (output.dir {} is not used)", resumed_run,
                      run_dir_));
    run_dir_ = resumed_run;
    cfg_.output_dir = run_dir_;
    start_ = last_saved_ = last_update_ = st_->step;
    skipped_ = res_.skipped_steps = st_->skipped;
    overflow_steps_ = res_.overflow_steps = st_->overflow_steps;
    last_saved_path_ = ck_path_;
  } else if (non_empty_dir(run_dir_) && !topt_.overwrite) {
    fail_config(
        "output.dir '{}' already holds files (an earlier run?); choose another output.dir, continue it with "
        "--resume {}, or pass --overwrite to replace it",
        run_dir_, run_dir_);
  }
  check_not_inside_a_run(run_dir_);
}

// The data (data-parallel: datasets draw global batches, world x data.batch_size rows), the
// memory check, the model (built on the host from the seed, so every device starts
// identical), the optimizer, the schedule and the RNG streams.
void Trainer::build() {
  // A subword run caches its tokens in <run>/data/; only rank 0 writes there (the other ranks
  // train the same deterministic tokenizer in a scratch directory of their own).
  DataContext ctx{.run_dir = dp_.is_root() ? run_dir_ : std::string()};
  if (st_) ctx.vocab = st_->vocab, ctx.vocab_size = st_->vocab_size, ctx.tokenizer_model = st_->tokenizer_model;
  data_ = make_dataset(dp_.global_data_config(cfg_), ctx);
  cfg_.model.vocab = data_->vocab_size();
  check_memory(estimate_resources(cfg_, data_->vocab_size()), topt_.ignore_memory_check, "train");
  if (st_) check_checkpoint_size(ck_path_, cfg_, data_->vocab_size());
  model_ = std::make_unique<nn::Model>(cfg_.model, cfg_.train.seed);
  device_ = train_device(cfg_, dp_.local_rank());
  k::set_allow_tf32(cfg_.train.allow_tf32);
  model_->to(device_);
  opt_ = make_optimizer(*model_, cfg_.optim);
  data_gen_ = Generator(cfg_.train.seed + 1);
  dropout_gen_ = Generator(cfg_.train.seed + 2);
  dropout_gen_.set_shard(uint64_t(dp_.rank()), uint64_t(dp_.world()));  // each rank its rows' dropout draws
  sched_.kind = cfg_.optim.schedule;
  sched_.base_lr = cfg_.optim.lr;
  sched_.warmup_steps = cfg_.optim.warmup;
  sched_.total_steps = cfg_.train.steps;
  sched_.min_lr_ratio = cfg_.optim.min_lr_ratio;
  nn::optim::validate(sched_);
  if (cfg_.train.precision == Precision::FP16) {
    scaler_.emplace(cfg_.train.loss_scale_init, cfg_.train.loss_scale_interval);
    if (st_ && st_->loss_scale > 0) scaler_->restore(st_->loss_scale, st_->loss_scale_good_steps);
  }
  params_ = model_->parameters();
  pos_params_ = model_->parameters_in_group(nn::group::kPosition);
  for (auto& [n, p] : model_->named_parameters())
    if (n.size() >= 10 && n.substr(n.size() - 10) == "bias_scale") alphas_.emplace_back(n, p);
  if (cfg_.model.mem_len > 0)
    segments_ = std::make_unique<SegmentStream>(data_->train_stream(), dp_.global_data_config(cfg_).data.batch_size,
                                                cfg_.data.seq_len);
}

// The checkpoint's tensors and RNG states (--resume).
void Trainer::restore() {
  Checkpoint ck;
  const NamedTensors like = model_->state_dict();
  load_checkpoint_tensors(ck_path_, like, optimizer_bytes_bound(like), ck);
  model_->load_state_dict(ck.model);
  opt_->load_state_dict(ck.optimizer);
  data_gen_.set_state(st_->data_rng);
  dropout_gen_.set_state(st_->dropout_rng);
  say(fmt::format("resumed from {} at step {}", ck_path_, start_));
  if (st_->world_size != dp_.world())
    say(
        fmt::format("warning: the checkpoint was written by {} rank(s), this run has {}: the global batch changes "
                    "from {} to {} rows, so the data order and losses differ from an uninterrupted run",
                    st_->world_size, dp_.world(), st_->world_size * cfg_.data.batch_size,
                    int64_t(dp_.world()) * cfg_.data.batch_size));
}

// The run directory, only now (nothing before wrote anything; rank 0 alone writes it), locked
// for the life of the run: a second train/--resume on it stops here, named.
void Trainer::open_run_dir() {
  if (!dp_.is_root()) return;
  std::error_code ec;
  fs::create_directories(run_dir_, ec);
  RELPOS_CHECK(!ec, "cannot create output.dir '{}': {}", run_dir_, ec.message());
  run_lock_.emplace(run_dir_, "run directory");
  if (!st_ && topt_.overwrite && non_empty_dir(run_dir_)) {
    // --overwrite replaces the earlier run's own files (other files are left alone).
    for (const char* f : {"checkpoints", "metrics.jsonl", "metrics.csv", "config.yaml"}) {
      fs::remove_all(fs::path(run_dir_) / f, ec);
      RELPOS_CHECK(!ec, "--overwrite: cannot remove {}/{}: {}", run_dir_, f, ec.message());
    }
    say(fmt::format("--overwrite: replaced the run in {}", run_dir_));
  }
  replace_file_atomically(run_dir_ + "/config.yaml", cfg_.yaml + "\n");
  metrics_.emplace(run_dir_, MetricsOptions{start_});  // a resumed run drops rows after its checkpoint
}

void Trainer::announce() const {
  say(fmt::format("model: {} with {} position encoding, {} parameters; data: {} (vocab {}); {} steps", cfg_.model.kind,
                  cfg_.model.position, model_->num_parameters(),
                  find_data_task(cfg_.data.task).text ? cfg_.data.path : cfg_.data.task, data_->vocab_size(),
                  cfg_.train.steps));
  if (const std::string t = data_->tokenizer_info(); !t.empty()) say(fmt::format("tokenizer: {}", t));
  if (cfg_.train.precision != Precision::FP32) {  // which kernels the 16-bit products run on (relpos info lists all)
    const std::string path = cfg_.train.device == Device::CPU
                                 ? "CPU GEMM: " + k::cpu_gemm_path(gemm_inputs(cfg_.train.precision)) +
                                       "; CPU attention tiles: " + k::cpu_attention_tile_path()
                                 : "CUDA: cuBLAS 16-bit GEMM (GemmEx), float32 accumulation";
    say(fmt::format("precision: {} ({})", cfg_.train.precision, path));
  }
  if (dp_.active())
    say(
        fmt::format("data-parallel: {} ranks ({}); data.batch_size {} is the per-rank micro-batch, the global batch is "
                    "{} rows; gradients summed in rank order; parameter check every {} steps",
                    dp_.world(), dp_.comm().backend(), cfg_.data.batch_size,
                    int64_t(dp_.world()) * cfg_.data.batch_size, cfg_.train.check_every));
}

TrainResult Trainer::run() {
  open_run_dir();
  announce();
  res_.run_dir = run_dir_;
  window_.t0 = Clock::now();
  model_->train();
  for (int64_t s = start_ + 1; s <= cfg_.train.steps; ++s) step(s);
  res_.steps_done = cfg_.train.steps;
  res_.seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
  return res_;
}

void Trainer::step(int64_t step) {
  dp_.inject_fault_before(step);
  const auto comm_t0 = Clock::now();
  dp_.rendezvous(step, fmt::format("step {}", step));  // a hung or dead rank stops the job here, named
  window_.comm_s += std::chrono::duration<double>(Clock::now() - comm_t0).count();
  const GeneratorState data_rng0 = data_gen_.state(), dropout_rng0 = dropout_gen_.state();
  const double lr = nn::optim::lr_at(sched_, step - 1);
  opt_->set_lr(lr);
  const bool log_step = step % cfg_.train.log_every == 0 || step == cfg_.train.steps;
  const bool eval_step = step % cfg_.train.eval_every == 0 || step == cfg_.train.steps;
  if (stats_) cuda::reset_transfer_stats();
  StepLoss sl = forward_backward(step, log_step);
  if (topt_.after_backward) topt_.after_backward(step, *model_);
  if (scaler_) nn::optim::scale_grads(params_, 1.0 / scaler_->scale());  // fp16: unscale before any use
  // The global gradient norm doubles as the non-finite check (NaN/Inf anywhere makes it
  // non-finite). It, the position parameters' norm and the loss come back in one transfer:
  // the only host read of a step that is not logged (a failed device check throws there).
  const StepValues sv = read_step(sl);
  monitor_divergence(step, sl.loss);
  const double pre_clip_norm = sv.norm;
  if (scaler_) {
    const bool finite = std::isfinite(pre_clip_norm) && std::isfinite(sl.loss);
    // an fp16 overflow: skip the update, halve the scale (a scale already below 1 that still
    // overflows is not a scaling problem: then nan_policy decides)
    if (!finite && scaler_->scale() >= 1.0) return overflow_step(step, sl.loss);
    if (finite) scaler_->update(true);
  }
  const std::string bad = !std::isfinite(sl.loss)        ? std::string("(loss)")
                          : std::isfinite(pre_clip_norm) ? std::string()
                                                         : first_nonfinite_grad(*model_);
  if (!bad.empty()) {
    if (cfg_.train.nan_policy == NanPolicy::Abort) abort_step(step, bad, sl.loss, data_rng0, dropout_rng0);
    skip_step(step, bad, sl.loss);
    maybe_checkpoint(step);  // a skipped last step still ends with a checkpoint
    return;
  }
  const double pos_norm = sv.pos_norm;
  const double norm = cfg_.optim.clip_grad_norm > 0
                          ? nn::optim::clip_grad_norm(params_, cfg_.optim.clip_grad_norm, pre_clip_norm)
                          : pre_clip_norm;
  opt_->step();
  last_update_ = step;
  opt_->zero_grad();
  dp_.inject_fault_after(step, *model_);
  dp_.check_parameters(*model_, step);
  res_.losses.push_back(sl.loss);
  window_.loss += sl.loss;
  window_.z += sl.z;
  ++window_.steps;
  if (stats_) {  // RELPOS_CUDA_STATS=1: this step's transfers, before logging and checkpointing
    const cuda::TransferStats t = cuda::transfer_stats();
    say(fmt::format("step {}: cuda transfers h2d {} ({} B), d2h {} ({} B), d2d {}, syncs {}", step, t.h2d, t.h2d_bytes,
                    t.d2h, t.d2h_bytes, t.d2d, t.syncs));
    res_.step_transfers.push_back(t);
  }
  if (log_step || eval_step) log_window(step, lr, norm, pos_norm, sl.stats, eval_step);
  maybe_checkpoint(step);
}

StepValues Trainer::read_step(StepLoss& sl) {
  std::vector<Tensor> parts;
  auto add = [&](const Tensor& t) {
    if (!t.defined()) return -1;
    Tensor v = t.to(DType::F64).reshape({1});
    if (!parts.empty() && v.device() != parts[0].device()) v = v.to(parts[0].device());  // grads on two devices
    parts.push_back(v);
    return int(parts.size()) - 1;
  };
  const int il = add(sl.loss_t), iz = add(sl.z_t), in = add(nn::optim::grad_sq_sum(params_));
  const int ip = pos_params_.empty() ? -1 : add(nn::optim::grad_sq_sum(pos_params_));
  std::vector<double> v;
  if (!parts.empty()) v = (parts.size() == 1 ? parts[0] : k::cat(parts, 0)).to_vector<double>();
  const double accum = double(cfg_.train.grad_accum);
  if (il >= 0) sl.loss = v[size_t(il)] / accum;
  if (iz >= 0)
    sl.z = v[size_t(iz)] / accum;
  else if (sl.loss_t.defined())
    sl.z = 0.0;
  StepValues out;
  out.norm = in >= 0 ? std::sqrt(v[size_t(in)]) : 0.0;
  out.pos_norm = ip >= 0 ? std::sqrt(v[size_t(ip)]) : 0.0;
  return out;
}

// The gradients of one step, accumulated over train.grad_accum micro-batches. Data-parallel:
// each rank's loss is weighted by its share of the global batch's target tokens (z-loss, a
// mean over rows, by 1/world), so the summed gradient is the gradient of the whole global
// batch's loss; one gradient collective per step, the losses summed over ranks.
StepLoss Trainer::forward_backward(int64_t step, bool log_step) {
  StepLoss out;
  double loss_sum = 0, z_sum = 0;
  const double accum = double(cfg_.train.grad_accum);
  for (int64_t micro = 0; micro < cfg_.train.grad_accum; ++micro) {
    bool fresh = false;
    Batch global = segments_ ? segments_->next(data_gen_, &fresh) : data_->train_batch(data_gen_);
    double w_ce = 1.0, w_z = 1.0;
    Batch local = dp_.shard(global);
    if (dp_.active()) {
      const int64_t g_count = DataParallel::count_targets(global);
      w_ce = g_count > 0 ? double(DataParallel::count_targets(local)) / double(g_count) : 1.0 / dp_.world();
      w_z = 1.0 / dp_.world();
    }
    Batch b = to_device(std::move(local), device_);
    if (fresh) memory_.reset();
    Variable zl, loss;
    {
      AutocastGuard autocast(cfg_.train.precision);  // the forward and the loss; backward follows the rounding
      loss = batch_loss(*model_, b, &dropout_gen_, log_step && micro == 0 ? &out.stats : nullptr, cfg_.optim.z_loss,
                        &zl, segments_ ? &memory_ : nullptr);
    }
    const double scale = (scaler_ ? scaler_->scale() : 1.0) / accum;  // fp16: the loss scale
    if (dp_.active()) {
      ((zl.defined() ? loss * w_ce + zl * w_z : loss * w_ce) * scale).backward();
    } else {
      ((zl.defined() ? loss + zl : loss) * scale).backward();
    }
    if (dp_.active()) {  // the collective sums host values
      loss_sum += loss.item() * w_ce;
      if (zl.defined()) z_sum += zl.item() * w_z;
    } else {  // on the device, read once per step (read_step): loss * 1.0 (w_ce) is loss
      Tensor l = loss.data().to(DType::F64);
      out.loss_t = out.loss_t.defined() ? k::add(out.loss_t, l) : l;
      if (zl.defined()) {
        Tensor z = zl.data().to(DType::F64);
        out.z_t = out.z_t.defined() ? k::add(out.z_t, z) : z;
      }
    }
    window_.tokens += b.target.numel() * dp_.world();
  }
  if (dp_.active()) {
    dp_.inject_fault_in_step(step);
    std::vector<double> sums{loss_sum, z_sum};
    const auto comm_t0 = Clock::now();
    dp_.sum_gradients(params_, sums);
    window_.comm_s += std::chrono::duration<double>(Clock::now() - comm_t0).count();
    loss_sum = sums[0];
    z_sum = sums[1];
  }
  out.loss = loss_sum / accum;
  out.z = z_sum / accum;
  return out;
}

// train.precision fp16: the step's gradients overflowed; no update, the loss scale halves.
void Trainer::overflow_step(int64_t step, double loss) {
  res_.overflow_steps = ++overflow_steps_;
  const double before = scaler_->scale();
  scaler_->update(false);
  const std::string where = nonfinite_grads_by_layer(*model_);
  opt_->zero_grad();
  log_metrics(step, {{"loss", loss},
                     {"overflow", true},
                     {"loss_scale", before},
                     {"overflow_steps", overflow_steps_},
                     {"nonfinite_grads", where}});
  if (overflow_steps_ <= 3 || step % cfg_.train.log_every == 0)
    say(fmt::format("step {}: fp16 overflow (loss scale {} -> {}), update skipped ({} so far)", step, before,
                    scaler_->scale(), overflow_steps_));
  maybe_checkpoint(step);
}

// Divergence monitor: the first step whose loss is non-finite or > 2x the running minimum.
void Trainer::monitor_divergence(int64_t step, double loss) {
  if (res_.first_divergence_step < 0 && (!std::isfinite(loss) || (std::isfinite(run_min_) && loss > 2.0 * run_min_))) {
    res_.first_divergence_step = step;
    log_metrics(step, {{"first_divergence_step", step}, {"divergence_loss", loss}, {"running_min_loss", run_min_}});
    say(fmt::format("step {}: first divergence (loss {} vs running minimum {})", step, loss, run_min_));
  }
  if (std::isfinite(loss)) run_min_ = std::min(run_min_, loss);
}

// nan_policy: skip. `bad` is "(loss)" or the first parameter whose gradient is not finite.
void Trainer::skip_step(int64_t step, const std::string& bad, double loss) {
  const std::string where = nonfinite_grads_by_layer(*model_);
  opt_->zero_grad();
  res_.skipped_steps = ++skipped_;
  say(fmt::format("step {}: non-finite {} ({}); update skipped ({} so far)", step,
                  bad == "(loss)" ? "loss" : "gradient", bad == "(loss)" ? fmt::format("{}", loss) : bad, skipped_));
  log_metrics(step, {{"loss", loss}, {"skipped", true}, {"skipped_steps", skipped_}, {"nonfinite_grads", where}});
}

// A checkpoint is a good state only when every tensor in it is finite (loading refuses any
// other) and the model it holds evaluates (train.eval_batches, train.precision) to a finite
// loss. `why`: the reason it is not.
bool Trainer::good_state(const std::string& checkpoint, std::string& why) {
  try {
    nn::Model m(cfg_.model, cfg_.train.seed);
    const NamedTensors like = m.state_dict();
    Checkpoint ck;
    load_checkpoint_tensors(checkpoint, like, optimizer_bytes_bound(like), ck);
    m.load_state_dict(ck.model);
    m.to(device_);
    m.eval();
    AutocastGuard autocast(cfg_.train.precision);
    const EvalResult ev = evaluate(m, *data_, cfg_);
    if (std::isfinite(ev.loss)) return true;
    why = fmt::format("its evaluation loss is {}", ev.loss);
  } catch (const Error& e) {
    why = e.what();
  }
  return false;
}

// The newest checkpoint of a step <= upto that is a good state (rank 0; "" when none is).
std::string Trainer::newest_good_state(int64_t upto, std::vector<std::string>& rejected) {
  if (!dp_.is_root()) return "";
  const auto cks = list_checkpoints(run_dir_);
  for (auto it = cks.rbegin(); it != cks.rend(); ++it) {
    if (it->first > upto) continue;
    std::string why;
    if (good_state(it->second, why)) return it->second;
    rejected.push_back(fmt::format("{} ({})", it->second, why));
  }
  return "";
}

// nan_policy: abort, keeping the last good state. Parameters are still those after step - 1.
// A non-finite gradient with a finite loss: they are saved (with the RNG states of the start of
// this step, as a regular checkpoint of step - 1 holds) and, when that checkpoint is a good
// state (good_state), named. A non-finite loss: the parameters it comes from are those after
// the last applied update (last_update_), which every checkpoint since holds too (skipped and
// fp16-overflow steps change nothing), so the newest good checkpoint before that update is named.
void Trainer::abort_step(int64_t step, const std::string& bad, double loss, const GeneratorState& data_rng0,
                         const GeneratorState& dropout_rng0) {
  opt_->zero_grad();
  std::string kept, why, note;
  std::vector<std::string> rejected;
  if (bad == "(loss)") {
    kept = newest_good_state(last_update_ - 1, rejected);
    if (last_saved_ >= last_update_)
      note = fmt::format("; the checkpoint {} holds the state whose loss is non-finite", last_saved_path_);
  } else if (dp_.is_root() && step - 1 >= 0) {
    try {
      if (last_saved_ != step - 1) save(step - 1, data_rng0, dropout_rng0);
    } catch (const Error& e) {
      why = e.what();
    }
    kept = newest_good_state(step - 1, rejected);
  }
  dp_.rendezvous(-step, fmt::format("the abort of step {}", step));  // rank 0 saved before anyone stops
  if (!dp_.is_root()) dp_.await_root_abort();                        // rank 0 reports the abort and stops the job
  std::string skipped;
  for (const auto& r : rejected) skipped += (skipped.empty() ? "" : "; ") + r;
  fail("step {}: non-finite {}{} (nan_policy: abort); {}{}{}{}", step,
       bad == "(loss)" ? "loss " : "gradient in parameter '", bad == "(loss)" ? fmt::format("{}", loss) : bad + "'",
       kept.empty() ? "no good checkpoint exists"
                    : fmt::format("the last good state (finite tensors, finite evaluation) is in {}", kept),
       why.empty() ? "" : fmt::format(" (the state after step {} was not saved: {})", step - 1, why), note,
       skipped.empty() ? "" : fmt::format("; not good: {}", skipped));
}

// The metrics row of a log step (means over the window since the last one), the evaluation on
// an eval step (rank 0; the other ranks go on to the next step's rendezvous), the progress line.
void Trainer::log_window(int64_t step, double lr, double norm, double pos_norm,
                         const std::vector<nn::AttentionStats>& stats, bool eval_step) {
  const double secs = std::chrono::duration<double>(Clock::now() - window_.t0).count();
  const double tok_s = secs > 0 ? double(window_.tokens) / secs : 0.0;
  const double steps = double(std::max<int64_t>(window_.steps, 1));
  nlohmann::ordered_json m = {{"loss", window_.loss / steps},
                              {"lr", lr},
                              {"grad_norm", norm},
                              {"clipped", cfg_.optim.clip_grad_norm > 0 && norm > cfg_.optim.clip_grad_norm},
                              {"tokens_per_s", tok_s},
                              {"pos_grad_norm", pos_norm}};
  if (!stats.empty()) {
    std::vector<double> mx, ent, act, above;
    std::vector<int64_t> nonfinite;
    for (auto& s : stats) {
      mx.push_back(s.max_abs_logit), ent.push_back(s.mean_entropy);
      act.push_back(s.max_abs_activation), nonfinite.push_back(s.nonfinite_activations);
      if (s.row_max_abs_logit.defined()) {  // rows of a NaN logit count as above (NaN > t is false: use !(x <= t))
        const Tensor& r = s.row_max_abs_logit;
        const Tensor at_most =
            k::binary(k::Binary::Le, r, Tensor::scalar(cfg_.train.logit_threshold, r.dtype(), r.device()));
        above.push_back(1.0 - k::sum(at_most).item() / double(std::max<int64_t>(r.numel(), 1)));
      }
    }
    m["max_attn_logit"] = mx;
    m["attn_entropy"] = ent;
    if (above.size() == stats.size()) m["attn_rows_above_threshold"] = above;  // per layer, train.logit_threshold
    m["max_abs_activation"] = act;           // per block output: the largest finite |value|
    m["nonfinite_activations"] = nonfinite;  // per block output: NaN/inf values
  }
  if (!alphas_.empty()) {
    std::vector<double> a;
    for (auto& [n, p] : alphas_)
      for (double v : p.data().to_vector<double>()) a.push_back(v);
    m["bias_scale"] = a;
  }
  if (cfg_.optim.z_loss > 0) m["z_loss"] = window_.z / steps;
  if (dp_.active()) m["comm_fraction"] = secs > 0 ? window_.comm_s / secs : 0.0;  // rank 0's share of wall time
  if (res_.first_divergence_step > 0) m["first_divergence_step"] = res_.first_divergence_step;
  if (skipped_ > 0) m["skipped_steps"] = skipped_;
  if (scaler_) m["loss_scale"] = scaler_->scale(), m["overflow_steps"] = overflow_steps_;
  res_.final_train_loss = m["loss"].get<double>();
  if (eval_step && dp_.is_root()) {
    model_->eval();
    AutocastGuard autocast(cfg_.train.precision);
    const EvalResult ev = evaluate(*model_, *data_, cfg_);
    model_->train();
    m["val_loss"] = ev.loss;
    m["val_accuracy"] = ev.accuracy;
    res_.final_val_loss = ev.loss;
    res_.final_val_step = step;
  }
  log_metrics(step, m);
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0_).count();
  const double eta = elapsed / double(step - start_) * double(cfg_.train.steps - step);
  if (topt_.progress_bar) {
    say(bar(step, cfg_.train.steps, m["loss"].get<double>(), lr, tok_s, eta) +
        (eval_step ? fmt::format("| val {:.4f}\n", res_.final_val_loss) : ""));
  } else {
    say(fmt::format("step {:>6}/{} | loss {:.4f}{} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s", step,
                    cfg_.train.steps, m["loss"].get<double>(),
                    eval_step && dp_.is_root() ? fmt::format(" | val loss {:.4f} acc {:.3f}", res_.final_val_loss,
                                                             m["val_accuracy"].get<double>())
                                               : "",
                    lr, norm, tok_s));
  }
  window_ = LogWindow{};
}

void Trainer::maybe_checkpoint(int64_t step) {
  if ((cfg_.train.checkpoint_every > 0 && step % cfg_.train.checkpoint_every == 0) || step == cfg_.train.steps) {
    last_saved_path_ = save(step, data_gen_.state(), dropout_gen_.state());
    last_saved_ = step;
  }
}

// A checkpoint of `step` (rank 0) with the RNG states after it, which are also those at the
// start of the next step (the abort path saves step - 1 with the states captured at step start).
std::string Trainer::save(int64_t step, const GeneratorState& data_rng, const GeneratorState& dropout_rng) {
  if (!dp_.is_root()) return "";
  nlohmann::json s;
  s["step"] = step;
  s["data_rng"] = rng_json(data_rng);
  s["dropout_rng"] = rng_json(dropout_rng);
  s["skipped_steps"] = skipped_;
  if (scaler_) {
    s["loss_scale"] = scaler_->scale();
    s["loss_scale_good_steps"] = scaler_->good_steps();
    s["overflow_steps"] = overflow_steps_;
  }
  s["vocab"] = data_->vocabulary();
  s["vocab_size"] = data_->vocab_size();
  if (const std::string model = data_->tokenizer_model(); !model.empty())
    s["tokenizer"] = {{"library", data_->tokenizer_info()}, {"model_base64", base64_encode(model)}};
  s["config_yaml"] = cfg_.yaml;
  s["world_size"] = dp_.world();
  s["relpos_version"] = "0.1.0";
  Checkpoint c{model_->state_dict(), opt_->state_dict(), s};
  std::string p = save_checkpoint(run_dir_, step, c, int(cfg_.train.keep_last));
  say(fmt::format("checkpoint: {}", p));
  return p;
}

}  // namespace

TrainResult train(const Config& cfg, const TrainOptions& topt) {
  return Trainer(cfg, topt).run();
}

LoadedRun load_run(const std::string& dir, const std::string& val_path) {
  LoadedRun r;
  r.checkpoint = resolve_checkpoint(dir);
  SavedState st = parse_state(load_checkpoint_state(r.checkpoint), r.checkpoint);
  r.cfg = saved_config(st, r.checkpoint);
  if (!val_path.empty()) {
    RELPOS_CHECK_CONFIG(find_data_task(r.cfg.data.task).val_file,
                        "--val-path '{}': this run's data.task '{}' reads no validation file", val_path,
                        r.cfg.data.task);
    r.cfg.data.val_path = val_path;
  }
  r.data = make_dataset(r.cfg, DataContext{.vocab = st.vocab,
                                           .vocab_size = st.vocab_size,
                                           .tokenizer_model = st.tokenizer_model,
                                           .run_dir = run_of_checkpoint(r.checkpoint)});
  r.cfg.model.vocab = r.data->vocab_size();
  check_checkpoint_size(r.checkpoint, r.cfg, r.data->vocab_size());
  r.model = std::make_unique<nn::Model>(r.cfg.model, r.cfg.train.seed);
  Checkpoint ck;
  const NamedTensors like = r.model->state_dict();
  load_checkpoint_tensors(r.checkpoint, like, optimizer_bytes_bound(like), ck);
  r.model->load_state_dict(ck.model);
  r.model->eval();
  r.step = st.step;
  return r;
}

std::string sample(const LoadedRun& run, const SampleOptions& o) {
  RELPOS_CHECK_CONFIG(run.cfg.model.kind == nn::ModelKind::Decoder, "sample: only decoder models generate text (this run is '{}')",
                      run.cfg.model.kind);
  RELPOS_CHECK_CONFIG(o.temperature >= 0, "sample: --temperature must be >= 0, got {}", o.temperature);
  // A distance from a data channel (an onset time) is known for the tokens of a file, not for
  // generated ones: nothing here can say when a generated event happens.
  RELPOS_CHECK_CONFIG(run.cfg.model.position_distance == "index",
                      "sample: this run's position encoding takes its distances from the data channel '{}' "
                      "(model.position.distance), which generated tokens do not carry; sample from a run whose "
                      "model.position.distance is 'index' (e.g. configs/chorales_t5.yaml)",
                      run.cfg.model.position_distance);
  NoGradGuard ng;
  std::vector<int64_t> ids = run.data->encode(o.prompt);
  if (ids.empty()) ids.push_back(run.data->start_token());
  Generator g(o.seed);
  nn::DecodeState st;
  const int64_t window = std::max<int64_t>(run.cfg.data.seq_len, 2);
  const std::vector<int64_t> prompt_ids = ids;
  if (int64_t(ids.size()) > window) ids.erase(ids.begin(), ids.end() - window);  // context fits the window
  const Device dev = run.model->device();
  auto tokens = [&](const std::vector<int64_t>& v) { return Tensor::from_vector(v, {1, int64_t(v.size())}).to(dev); };
  Variable logits = run.model->decode_step(tokens(ids), st);
  std::vector<int64_t> out;
  for (int64_t t = 0; t < o.tokens; ++t) {
    std::vector<double> last = logits.data().select(1, logits.size(1) - 1).to_vector<double>();
    int64_t next = 0;
    if (o.temperature == 0) {
      next = std::max_element(last.begin(), last.end()) - last.begin();
    } else {
      double mx = *std::max_element(last.begin(), last.end()), z = 0;
      for (auto& v : last) z += (v = std::exp((v - mx) / o.temperature));
      double r = g.uniform() * z, acc = 0;
      next = int64_t(last.size()) - 1;
      for (size_t j = 0; j < last.size(); ++j)
        if ((acc += last[j]) > r) {
          next = int64_t(j);
          break;
        }
    }
    out.push_back(next);
    ids.push_back(next);
    if (st.position >= window) {
      // The model was trained on windows of seq_len tokens: rather than attend further than it
      // ever saw, rebuild the KV cache from the last half window (positions restart at 0).
      st = nn::DecodeState{};
      std::vector<int64_t> tail(ids.end() - window / 2, ids.end());
      logits = run.model->decode_step(tokens(tail), st);
    } else {
      logits = run.model->decode_step(tokens({next}), st);
    }
  }
  std::vector<int64_t> all = prompt_ids;
  all.insert(all.end(), out.begin(), out.end());
  return run.data->decode(all);
}

}  // namespace relpos::train
