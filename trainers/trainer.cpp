#include "trainers/trainer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/cuda_runtime.h"
#include "kernels/ops.h"
#include "nn/optim/adam.h"
#include "nn/optim/clip.h"
#include "nn/optim/param_groups.h"
#include "nn/optim/schedule.h"
#include "nn/optim/sgd.h"
#include "nn/stability.h"
#include "trainers/checkpoint.h"
#include "trainers/metrics.h"
#include "trainers/segments.h"

namespace fs = std::filesystem;

namespace relpos::train {

namespace {

using Clock = std::chrono::steady_clock;

// SGD or Adam/AdamW behind one face.
class Optimizer {
 public:
  Optimizer(const nn::Model& m, const OptimConfig& o) {
    auto groups = nn::optim::param_groups_by_tag(m, o.weight_decay, o.no_decay);
    if (o.name == "sgd") {
      sgd_ = std::make_unique<nn::optim::SGD>(m.parameters(), nn::optim::SGDOptions{o.lr, o.momentum, o.weight_decay});
      return;
    }
    nn::optim::AdamOptions a;
    a.lr = o.lr;
    a.beta1 = o.beta1;
    a.beta2 = o.beta2;
    a.eps = o.eps;
    if (o.name == "adam")
      adam_ = std::make_unique<nn::optim::Adam>(groups, a);
    else
      adam_ = std::make_unique<nn::optim::AdamW>(groups, a);
  }
  void set_lr(double lr) { sgd_ ? sgd_->set_lr(lr) : adam_->set_lr(lr); }
  void step() { sgd_ ? sgd_->step() : adam_->step(); }
  void zero_grad() { sgd_ ? sgd_->zero_grad() : adam_->zero_grad(); }
  std::vector<std::pair<std::string, Tensor>> state_dict() const { return sgd_ ? sgd_->state_dict() : adam_->state_dict(); }
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& s) {
    sgd_ ? sgd_->load_state_dict(s) : adam_->load_state_dict(s);
  }

 private:
  std::unique_ptr<nn::optim::SGD> sgd_;
  std::unique_ptr<nn::optim::AdamBase> adam_;
};

nlohmann::json rng_json(const Generator& g) { return {{"seed", g.state().seed}, {"offset", g.state().offset}}; }
GeneratorState rng_from(const nlohmann::json& j) { return {j.at("seed").get<uint64_t>(), j.at("offset").get<uint64_t>()}; }

// Cross-entropy of the model on a batch; logits [B, L, V] flattened against targets.
// With z_coef > 0 the z-loss term z_coef * mean(logsumexp(logits)^2) is returned in *z
// (nn/stability.h); the caller adds it to the loss it differentiates, not to the logged one.
Variable batch_loss(const nn::Model& m, const Batch& b, Generator* gen, std::vector<nn::AttentionStats>* stats,
                    double z_coef = 0.0, Variable* z = nullptr, nn::SegmentMemory* mem = nullptr) {
  Variable logits = m.config().kind == "encoder_decoder" ? m.forward_seq2seq(b.input, b.dec_input, b.padding, gen, stats)
                    : mem ? m.forward_with_memory(b.input, *mem, gen, stats)  // Transformer-XL segments
                          : m.forward(b.input, b.padding, gen, stats, b.position_index);
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
  for (Tensor* t : {&b.input, &b.target, &b.dec_input, &b.padding, &b.position_index})
    if (t->defined()) *t = t->to(device);
  return b;
}

Device train_device(const Config& cfg) {
  if (cfg.train.device != "cuda") return Device::CPU;
  RELPOS_CHECK(cuda::built_with_cuda(), "train.device is 'cuda' but this relpos was built without CUDA support "
                                        "(rebuild with nvcc and -DRELPOS_CUDA=ON), or set train.device: cpu");
  RELPOS_CHECK(cuda::available(), "train.device is 'cuda' but no CUDA device is available on this machine "
                                  "(relpos info lists devices); set train.device: cpu");
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
    Variable logits = cfg.model.kind == "encoder_decoder" ? model.forward_seq2seq(b.input, b.dec_input, b.padding)
                                                          : model.forward(b.input, b.padding, nullptr, nullptr, b.position_index);
    const int64_t V = logits.size(-1);
    Tensor flat = logits.data().reshape({-1, V});
    Tensor tg = b.target.reshape({-1});
    k::CrossEntropyOut ce = k::cross_entropy(flat, tg, kIgnore, k::Reduction::Sum);
    loss_sum += ce.loss.item();
    r.tokens += ce.count;
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

TrainResult train(const Config& cfg_in, const TrainOptions& topt) {
  auto say = [&](const std::string& s) {
    if (topt.log) topt.log(s);
  };
  Config cfg = cfg_in;
  const auto t0 = Clock::now();
  if (cfg.train.threads > 0) k::set_num_threads(int(cfg.train.threads));

  // ---- resume: model/optimizer/RNG state from a checkpoint
  std::optional<Checkpoint> ck;
  std::string ck_path;
  std::vector<std::string> vocab;
  if (topt.resume) {
    ck_path = resolve_checkpoint(*topt.resume);
    ck = load_checkpoint(ck_path);
    Config saved = parse_config(ck->state.at("config_yaml").get<std::string>(), ck_path + "/trainer_state.json");
    check_same_model(cfg, saved, ck_path);
    vocab = ck->state.value("vocab", std::vector<std::string>{});
  }
  std::unique_ptr<Dataset> data = make_dataset(cfg, vocab);
  cfg.model.vocab = data->vocab_size();
  nn::Model model(cfg.model, cfg.train.seed);
  const Device device = train_device(cfg);
  k::set_allow_tf32(cfg.train.allow_tf32);
  model.to(device);  // parameters built on the host from the seed, so every device starts identical
  Optimizer opt(model, cfg.optim);
  Generator data_gen(cfg.train.seed + 1), dropout_gen(cfg.train.seed + 2);
  int64_t start = 0, skipped = 0;
  if (ck) {
    model.load_state_dict(ck->model);
    opt.load_state_dict(ck->optimizer);
    start = ck->state.at("step").get<int64_t>();
    skipped = ck->state.value("skipped_steps", int64_t(0));
    data_gen.set_state(rng_from(ck->state.at("data_rng")));
    dropout_gen.set_state(rng_from(ck->state.at("dropout_rng")));
    RELPOS_CHECK_CONFIG(start < cfg.train.steps, "--resume: checkpoint is at step {}, train.steps is {}: nothing to do",
                        start, cfg.train.steps);
    say(fmt::format("resumed from {} at step {}", ck_path, start));
  }

  const std::string run_dir = cfg.output_dir;
  fs::create_directories(run_dir);
  {
    std::ofstream f(run_dir + "/config.yaml");
    f << cfg.yaml << "\n";
    RELPOS_CHECK(f.good(), "cannot write {}/config.yaml", run_dir);
  }
  MetricsWriter metrics(run_dir, MetricsOptions{start});  // a resumed run drops rows after its checkpoint
  say(fmt::format("model: {} with {} position encoding, {} parameters; data: {} (vocab {}); {} steps", cfg.model.kind,
                  cfg.model.position, model.num_parameters(), cfg.data.task == "text" ? cfg.data.path : cfg.data.task,
                  data->vocab_size(), cfg.train.steps));

  nn::optim::ScheduleOptions sched;
  sched.kind = nn::optim::parse_lr_schedule(cfg.optim.schedule);
  sched.base_lr = cfg.optim.lr;
  sched.warmup_steps = cfg.optim.warmup;
  sched.total_steps = cfg.train.steps;
  sched.min_lr_ratio = cfg.optim.min_lr_ratio;
  nn::optim::validate(sched);

  const std::vector<Variable> params = model.parameters();
  const std::vector<Variable> pos_params = model.parameters_in_group(nn::group::kPosition);
  std::vector<std::pair<std::string, Variable>> alphas;
  for (auto& [n, p] : model.named_parameters())
    if (n.size() >= 10 && n.substr(n.size() - 10) == "bias_scale") alphas.emplace_back(n, p);

  auto make_state = [&](int64_t step) {
    nlohmann::json s;
    s["step"] = step;
    s["data_rng"] = rng_json(data_gen);
    s["dropout_rng"] = rng_json(dropout_gen);
    s["skipped_steps"] = skipped;
    s["vocab"] = data->vocabulary();
    s["config_yaml"] = cfg.yaml;
    s["relpos_version"] = "0.1.0";
    return s;
  };
  auto save = [&](int64_t step) {
    Checkpoint c{model.state_dict(), opt.state_dict(), make_state(step)};
    std::string p = save_checkpoint(run_dir, step, c, int(cfg.train.keep_last));
    say(fmt::format("checkpoint: {}", p));
    return p;
  };

  // Transformer-XL segment training (model.mem_len > 0): consecutive segments per batch row,
  // with the detached memory of the previous segments. A resumed run starts new streams.
  std::unique_ptr<SegmentStream> segments;
  nn::SegmentMemory memory(cfg.model.mem_len);
  if (cfg.model.mem_len > 0)
    segments = std::make_unique<SegmentStream>(data->train_stream(), cfg.data.batch_size, cfg.data.seq_len);

  TrainResult res;
  res.run_dir = run_dir;
  res.skipped_steps = skipped;
  double window_loss = 0, window_z = 0;
  double run_min = std::numeric_limits<double>::infinity();  // running minimum of the training loss
  int64_t window_n = 0, window_tokens = 0;
  auto window_t0 = Clock::now();
  int64_t last_saved = ck ? start : -1;
  model.train();
  for (int64_t step = start + 1; step <= cfg.train.steps; ++step) {
    const double lr = nn::optim::lr_at(sched, step - 1);
    opt.set_lr(lr);
    const bool log_step = step % cfg.train.log_every == 0 || step == cfg.train.steps;
    std::vector<nn::AttentionStats> stats;
    double loss_sum = 0, z_sum = 0;
    for (int64_t micro = 0; micro < cfg.train.grad_accum; ++micro) {
      bool fresh = false;
      Batch b = to_device(segments ? segments->next(data_gen, &fresh) : data->train_batch(data_gen), device);
      if (fresh) memory.reset();
      Variable zl;
      Variable loss = batch_loss(model, b, &dropout_gen, log_step && micro == 0 ? &stats : nullptr, cfg.optim.z_loss, &zl,
                                 segments ? &memory : nullptr);
      ((zl.defined() ? loss + zl : loss) * (1.0 / double(cfg.train.grad_accum))).backward();
      loss_sum += loss.item();
      if (zl.defined()) z_sum += zl.item();
      window_tokens += b.target.numel();
    }
    if (topt.after_backward) topt.after_backward(step, model);
    const double train_loss = loss_sum / double(cfg.train.grad_accum);
    // Divergence monitor: the first step whose loss is non-finite or > 2x the running minimum.
    if (res.first_divergence_step < 0 &&
        (!std::isfinite(train_loss) || (std::isfinite(run_min) && train_loss > 2.0 * run_min))) {
      res.first_divergence_step = step;
      metrics.log(step, {{"first_divergence_step", step}, {"divergence_loss", train_loss}, {"running_min_loss", run_min}});
      say(fmt::format("step {}: first divergence (loss {} vs running minimum {})", step, train_loss, run_min));
    }
    if (std::isfinite(train_loss)) run_min = std::min(run_min, train_loss);
    // The global gradient norm doubles as the non-finite check (NaN/Inf anywhere makes it
    // non-finite): one reduction on the device and one host read per step.
    const double pre_clip_norm = nn::optim::grad_norm(params);
    std::string bad = !std::isfinite(train_loss)      ? std::string("(loss)")
                      : std::isfinite(pre_clip_norm) ? std::string()
                                                     : first_nonfinite_grad(model);
    if (!bad.empty()) {
      if (cfg.train.nan_policy == "skip") {
        opt.zero_grad();
        ++skipped;
        res.skipped_steps = skipped;
        say(fmt::format("step {}: non-finite {} ({}); update skipped ({} so far)", step,
                        bad == "(loss)" ? "loss" : "gradient", bad == "(loss)" ? fmt::format("{}", train_loss) : bad,
                        skipped));
        metrics.log(step, {{"loss", train_loss}, {"skipped", true}, {"skipped_steps", skipped}});
        continue;
      }
      // abort: keep the last good state (parameters are still those after step - 1)
      std::string kept = last_saved == step - 1 ? "" : save(step - 1);
      opt.zero_grad();
      fail("step {}: non-finite {}{} (nan_policy: abort); the last good state is in {}", step,
           bad == "(loss)" ? "loss " : "gradient in parameter '",
           bad == "(loss)" ? fmt::format("{}", train_loss) : bad + "'",
           kept.empty() ? fmt::format("{}/checkpoints (step {})", run_dir, step - 1) : kept);
    }
    const double pos_norm = pos_params.empty() ? 0.0 : nn::optim::grad_norm(pos_params);
    const double norm = cfg.optim.clip_grad_norm > 0
                            ? nn::optim::clip_grad_norm(params, cfg.optim.clip_grad_norm, pre_clip_norm)
                            : pre_clip_norm;
    opt.step();
    opt.zero_grad();
    res.losses.push_back(train_loss);
    window_loss += train_loss;
    window_z += z_sum / double(cfg.train.grad_accum);
    ++window_n;

    const bool eval_step = step % cfg.train.eval_every == 0 || step == cfg.train.steps;
    if (log_step || eval_step) {
      const double secs = std::chrono::duration<double>(Clock::now() - window_t0).count();
      const double tok_s = secs > 0 ? double(window_tokens) / secs : 0.0;
      nlohmann::ordered_json m = {{"loss", window_loss / double(std::max<int64_t>(window_n, 1))},
                          {"lr", lr},
                          {"grad_norm", norm},
                          {"clipped", cfg.optim.clip_grad_norm > 0 && norm > cfg.optim.clip_grad_norm},
                          {"tokens_per_s", tok_s},
                          {"pos_grad_norm", pos_norm}};
      if (!stats.empty()) {
        std::vector<double> mx, ent;
        for (auto& s : stats) mx.push_back(s.max_abs_logit), ent.push_back(s.mean_entropy);
        m["max_attn_logit"] = mx;
        m["attn_entropy"] = ent;
      }
      if (!alphas.empty()) {
        std::vector<double> a;
        for (auto& [n, p] : alphas)
          for (double v : p.data().to_vector<double>()) a.push_back(v);
        m["bias_scale"] = a;
      }
      if (cfg.optim.z_loss > 0) m["z_loss"] = window_z / double(std::max<int64_t>(window_n, 1));
      if (res.first_divergence_step > 0) m["first_divergence_step"] = res.first_divergence_step;
      if (skipped > 0) m["skipped_steps"] = skipped;
      res.final_train_loss = m["loss"].get<double>();
      if (eval_step) {
        model.eval();
        EvalResult ev = evaluate(model, *data, cfg);
        model.train();
        m["val_loss"] = ev.loss;
        m["val_accuracy"] = ev.accuracy;
        res.final_val_loss = ev.loss;
      }
      metrics.log(step, m);
      const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
      const double eta = elapsed / double(step - start) * double(cfg.train.steps - step);
      if (topt.progress_bar) {
        say(bar(step, cfg.train.steps, m["loss"].get<double>(), lr, tok_s, eta) +
            (eval_step ? fmt::format("| val {:.4f}\n", res.final_val_loss) : ""));
      } else {
        say(fmt::format("step {:>6}/{} | loss {:.4f}{} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s", step,
                        cfg.train.steps, m["loss"].get<double>(),
                        eval_step ? fmt::format(" | val loss {:.4f} acc {:.3f}", res.final_val_loss,
                                                m["val_accuracy"].get<double>())
                                  : "",
                        lr, norm, tok_s));
      }
      window_loss = 0;
      window_z = 0;
      window_n = 0;
      window_tokens = 0;
      window_t0 = Clock::now();
    }
    if ((cfg.train.checkpoint_every > 0 && step % cfg.train.checkpoint_every == 0) || step == cfg.train.steps) {
      save(step);
      last_saved = step;
    }
  }
  res.steps_done = cfg.train.steps;
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return res;
}

LoadedRun load_run(const std::string& dir) {
  LoadedRun r;
  r.checkpoint = resolve_checkpoint(dir);
  Checkpoint ck = load_checkpoint(r.checkpoint);
  r.cfg = parse_config(ck.state.at("config_yaml").get<std::string>(), r.checkpoint + "/trainer_state.json");
  r.data = make_dataset(r.cfg, ck.state.value("vocab", std::vector<std::string>{}));
  r.cfg.model.vocab = r.data->vocab_size();
  r.model = std::make_unique<nn::Model>(r.cfg.model, r.cfg.train.seed);
  r.model->load_state_dict(ck.model);
  r.model->eval();
  r.step = ck.state.at("step").get<int64_t>();
  return r;
}

std::string sample(const LoadedRun& run, const SampleOptions& o) {
  RELPOS_CHECK_CONFIG(run.cfg.model.kind == "decoder", "sample: only decoder models generate text (this run is '{}')",
                      run.cfg.model.kind);
  RELPOS_CHECK_CONFIG(o.temperature >= 0, "sample: --temperature must be >= 0, got {}", o.temperature);
  NoGradGuard ng;
  std::vector<int64_t> ids = run.data->encode(o.prompt);
  if (ids.empty()) ids.push_back(0);  // start from the first vocabulary entry
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
