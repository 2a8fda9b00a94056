// cli/main.cpp — the relpos executable.
//   relpos train CONFIG [--set k=v ...] [--resume DIR] [--overwrite] [--ignore-memory-check]
//                                                      train from a YAML config
//   relpos eval RUN_DIR [--seq-len N ...] [--json]      validation loss/perplexity/accuracy
//   relpos sample RUN_DIR [--prompt T] [--tokens N]     generate with the KV cache (decoders)
//   relpos validate CONFIG [--set k=v ...]             check a config without training
//   relpos demo [--steps N] [--data PATH] ...          the char-MLP demo
//   relpos list                                        registered position encodings
//   relpos bias --type NAME --heads H --lq N --lk M    the bias a fresh encoding adds [H][Lq][Lk]
//   relpos gradcheck [--type NAME|all]                 float64 gradcheck of attention + encoding
//   relpos info                                        build and device facts
// Exit codes: 0 ok, 2 usage or config error (including a config that does not fit in memory),
// 1 runtime failure (a failed gradcheck, a damaged checkpoint, an I/O error, out of memory).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "kernels/ops.h"
#include "nn/positional/registry.h"
#include "trainers/data.h"
#include "trainers/demo.h"
#include "trainers/limits.h"
#include "trainers/inspect.h"
#include "trainers/trainer.h"

namespace {

struct UsageError : relpos::Error {
  using relpos::Error::Error;
};

std::map<std::string, std::string> parse_params(const std::vector<std::string>& kvs) {
  std::map<std::string, std::string> out;
  for (const auto& kv : kvs) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError(fmt::format("--param '{}': expected key=value", kv));
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

int run_bias(const relpos::inspect::BiasRequest& req, bool json) {
  relpos::inspect::BiasReport r = relpos::inspect::position_bias(req);
  // With --causal, future keys are masked: their bias never reaches the softmax.
  auto masked = [&](int64_t i, int64_t j) { return req.causal && req.k_offset + j > req.q_offset + i; };
  if (json) {
    nlohmann::json j;
    j["type"] = req.type;
    j["heads"] = req.heads;
    j["lq"] = req.lq;
    j["lk"] = req.lk;
    j["q_offset"] = req.q_offset;
    j["k_offset"] = req.k_offset;
    j["causal"] = req.causal;
    j["params"] = req.params;  // masked (future) cells of a causal bias are null
    if (!r.bias.empty()) {
      auto& b = j["bias"] = nlohmann::json::array();
      for (int64_t h = 0; h < req.heads; ++h) {
        nlohmann::json rows = nlohmann::json::array();
        for (int64_t i = 0; i < req.lq; ++i) {
          nlohmann::json row = nlohmann::json::array();
          for (int64_t j = 0; j < req.lk; ++j)
            row.push_back(masked(i, j) ? nlohmann::json(nullptr) : nlohmann::json(r.bias[size_t((h * req.lq + i) * req.lk + j)]));
          rows.push_back(row);
        }
        b.push_back(rows);
      }
    }
    if (!r.index.empty()) {
      auto& ix = j["index"] = nlohmann::json::array();
      for (int64_t i = 0; i < req.lq; ++i)
        ix.push_back(std::vector<int64_t>(r.index.begin() + i * req.lk, r.index.begin() + (i + 1) * req.lk));
    }
    if (!r.note.empty()) j["note"] = r.note;
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("{} bias, {} heads, Lq {} (offset {}), Lk {} (offset {}), {}\n", req.type, req.heads, req.lq,
             req.q_offset, req.lk, req.k_offset, req.causal ? "causal" : "bidirectional");
  if (!r.note.empty()) fmt::print("{}\n", r.note);
  if (!r.index.empty()) {
    fmt::print("index [Lq][Lk]:\n");
    for (int64_t i = 0; i < req.lq; ++i)
      fmt::print("  {}\n", fmt::join(r.index.begin() + i * req.lk, r.index.begin() + (i + 1) * req.lk, " "));
  }
  for (int64_t h = 0; h < req.heads && !r.bias.empty(); ++h) {
    fmt::print("head {}:\n", h);
    for (int64_t i = 0; i < req.lq; ++i) {
      std::string line;
      for (int64_t j = 0; j < req.lk; ++j)
        line += masked(i, j) ? fmt::format(" {:>9}", "masked")
                             : fmt::format(" {:9.4g}", r.bias[size_t((h * req.lq + i) * req.lk + j)]);
      fmt::print(" {}\n", line);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"relpos — train small transformers with relative position encodings"};
  app.require_subcommand(1);

  relpos::demo::CharMlpConfig demo;
  int threads = 0;
  auto* demo_cmd = app.add_subcommand("demo", "train a character-level MLP language model on a text file");
  demo_cmd->add_option("--data", demo.data_path, "UTF-8/byte text file")->capture_default_str();
  demo_cmd->add_option("--steps", demo.steps, "training steps")->check(CLI::PositiveNumber)->capture_default_str();
  demo_cmd->add_option("--batch", demo.batch, "batch size")->check(CLI::PositiveNumber)->capture_default_str();
  demo_cmd->add_option("--lr", demo.lr, "peak SGD learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  demo_cmd->add_option("--seed", demo.seed, "random seed")->capture_default_str();
  demo_cmd->add_option("--eval-every", demo.eval_every, "steps between evaluations")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--threads", threads, "CPU threads (default: OMP_NUM_THREADS or all cores)")->check(CLI::NonNegativeNumber);

  auto* list_cmd = app.add_subcommand("list", "list the registered position encodings");

  relpos::inspect::BiasRequest bias;
  std::vector<std::string> bias_params;
  bool bias_json = false, bias_causal = false, bias_bidir = false;
  std::string table_mode = "init";
  auto* bias_cmd = app.add_subcommand("bias", "print the additive bias [H][Lq][Lk] (and lookup index) of an encoding");
  bias_cmd->add_option("--type", bias.type, "position encoding (relpos list)")->required();
  using relpos::train::kMaxBiasHeads, relpos::train::kMaxBiasLen, relpos::train::kMaxOffset;
  bias_cmd->add_option("--heads", bias.heads, "number of heads")->check(CLI::Range(int64_t(1), kMaxBiasHeads))->capture_default_str();
  bias_cmd->add_option("--lq", bias.lq, "query length")->check(CLI::Range(int64_t(1), kMaxBiasLen))->capture_default_str();
  bias_cmd->add_option("--lk", bias.lk, "key length")->check(CLI::Range(int64_t(1), kMaxBiasLen))->capture_default_str();
  bias_cmd->add_option("--q-offset", bias.q_offset, "absolute position of query 0")->check(CLI::Range(int64_t(0), kMaxOffset));
  bias_cmd->add_option("--k-offset", bias.k_offset, "absolute position of key 0")->check(CLI::Range(int64_t(0), kMaxOffset));
  auto* causal_flag = bias_cmd->add_flag("--causal", bias_causal, "decoder (causal) form");
  bias_cmd->add_flag("--bidirectional", bias_bidir, "encoder (bidirectional) form (default)")->excludes(causal_flag);
  bias_cmd->add_option("--param", bias_params, "encoding parameter key=value (repeatable)");
  bias_cmd->add_option("--table", table_mode, "init: freshly initialised tables; identity: row r holds r (shows buckets)")
      ->check(CLI::IsMember({"init", "identity"}));
  bias_cmd->add_option("--seed", bias.seed, "initialisation seed");
  bias_cmd->add_flag("--json", bias_json, "print JSON");

  std::string gc_type = "all";
  std::vector<std::string> gc_params;
  auto* gc_cmd = app.add_subcommand("gradcheck", "float64 gradcheck of an attention layer with each position encoding");
  gc_cmd->add_option("--type", gc_type, "position encoding or 'all'")->capture_default_str();
  gc_cmd->add_option("--param", gc_params, "encoding parameter key=value (repeatable, single --type only)");

  auto* info_cmd = app.add_subcommand("info", "print build and device information");

  std::string train_config, resume_dir;
  std::vector<std::string> sets;
  bool overwrite = false, ignore_memory = false;
  auto* train_cmd = app.add_subcommand("train", "train a model from a YAML config");
  train_cmd->add_option("config", train_config, "YAML config file")->required();
  train_cmd->add_option("--set", sets, "override a config value, e.g. --set model.n_layers=4 (repeatable)");
  train_cmd->add_option("--resume", resume_dir, "continue from a run directory (latest checkpoint) or a checkpoint; "
                        "the run continues in that directory");
  train_cmd->add_flag("--overwrite", overwrite, "replace the run files (checkpoints, metrics, config.yaml) of a non-empty output.dir");
  train_cmd->add_flag("--ignore-memory-check", ignore_memory, "train even when the memory estimate exceeds MemAvailable");

  std::string validate_config;
  auto* validate_cmd = app.add_subcommand("validate", "check a config (and its --set overrides) without training");
  validate_cmd->add_option("config", validate_config, "YAML config file")->required();
  validate_cmd->add_option("--set", sets, "override a config value (repeatable)");
  validate_cmd->add_flag("--ignore-memory-check", ignore_memory, "report the memory estimate without refusing");

  std::string eval_dir;
  std::vector<int64_t> eval_lens;
  bool eval_json = false;
  auto* eval_cmd = app.add_subcommand("eval", "evaluate a trained run on its validation data");
  eval_cmd->add_option("run_dir", eval_dir, "run directory or checkpoint directory")->required();
  eval_cmd->add_option("--seq-len", eval_lens, "evaluate at these sequence lengths (default: the training length)")
      ->check(CLI::Range(int64_t(1), relpos::train::kMaxLen));
  eval_cmd->add_flag("--ignore-memory-check", ignore_memory, "evaluate even when the memory estimate exceeds MemAvailable");
  eval_cmd->add_flag("--json", eval_json, "print JSON");

  std::string sample_dir;
  relpos::train::SampleOptions sample_opt;
  auto* sample_cmd = app.add_subcommand("sample", "generate from a trained decoder (KV cache)");
  sample_cmd->add_option("run_dir", sample_dir, "run directory or checkpoint directory")->required();
  sample_cmd->add_option("--prompt", sample_opt.prompt, "text to continue");
  sample_cmd->add_option("--tokens", sample_opt.tokens, "tokens to generate")
      ->check(CLI::Range(int64_t(1), relpos::train::kMaxSampleTokens))->capture_default_str();
  sample_cmd->add_option("--temperature", sample_opt.temperature, "sampling temperature (0 = greedy)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  sample_cmd->add_option("--seed", sample_opt.seed, "sampling seed")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (threads > 0) relpos::k::set_num_threads(threads);
    if (*info_cmd) {
      fmt::print("relpos 0.1.0\nthreads: {}\ncuda: {}\ncuda devices: {}\n", relpos::k::num_threads(),
                 relpos::cuda::built_with_cuda() ? "built" : "not built", relpos::cuda::device_count());
      return 0;
    }
    if (*validate_cmd) {
      relpos::train::Config c = relpos::train::load_config(validate_config, sets);
      // What train checks before it starts: the data file (exists, readable, UTF-8) and memory.
      int64_t vocab = c.model.vocab;
      if (c.data.task == "text") {
        std::vector<std::string> chars = relpos::train::read_text_data(c.data.path);
        std::sort(chars.begin(), chars.end());
        vocab = std::unique(chars.begin(), chars.end()) - chars.begin();
      }
      relpos::train::ResourceEstimate est = relpos::train::estimate_resources(c, vocab);
      relpos::train::check_memory(est, ignore_memory, "validate");
      fmt::print("{}: ok ({} {} with {} position encoding, task {}, {} steps; {} parameters, estimated memory {})\n",
                 validate_config, c.model.kind, fmt::format("d_model {} x {} layers", c.model.d_model, c.model.n_layers),
                 c.model.position, c.data.task, c.train.steps, est.parameters, est.str());
      return 0;
    }
    if (*train_cmd) {
      relpos::train::Config c = relpos::train::load_config(train_config, sets);
      relpos::train::TrainOptions to;
      if (!resume_dir.empty()) to.resume = resume_dir;
      to.overwrite = overwrite;
      to.ignore_memory_check = ignore_memory;
      to.progress_bar = isatty(fileno(stdout));
      to.log = [](const std::string& s) {
        fmt::print("{}", s);
        if (s.empty() || (s.back() != '\n' && s.front() != '\r')) fmt::print("\n");
        std::fflush(stdout);
      };
      relpos::train::TrainResult r = relpos::train::train(c, to);
      fmt::print("done: {} steps in {:.1f} s; final train loss {:.4f}, val loss {:.4f}{}; run in {}\n", r.steps_done,
                 r.seconds, r.final_train_loss, r.final_val_loss,
                 r.skipped_steps ? fmt::format(" ({} steps skipped)", r.skipped_steps) : "", r.run_dir);
      if (c.model.kind == "decoder" && c.data.task == "text") {
        relpos::train::LoadedRun run = relpos::train::load_run(r.run_dir);
        relpos::train::SampleOptions so;
        so.prompt = "\n";
        so.tokens = 200;
        so.temperature = 0.8;
        fmt::print("sample:\n{}\n", relpos::train::sample(run, so));
      }
      return 0;
    }
    if (*eval_cmd) {
      relpos::train::LoadedRun run = relpos::train::load_run(eval_dir);
      if (eval_lens.empty()) eval_lens.push_back(run.cfg.data.seq_len);
      nlohmann::json j = nlohmann::json::array();
      for (int64_t L : eval_lens)
        relpos::train::check_memory(relpos::train::estimate_resources(run.cfg, run.data->vocab_size(), L), ignore_memory,
                                    fmt::format("eval --seq-len {}", L));
      for (int64_t L : eval_lens) {
        auto e = relpos::train::evaluate(*run.model, *run.data, run.cfg, L);
        // A non-finite loss is a failure, never a result.
        if (!std::isfinite(e.loss))
          throw relpos::Error(fmt::format("eval {}: the loss at seq_len {} is {} (the model's outputs are not finite)",
                                          run.checkpoint, L, e.loss));
        if (eval_json)
          j.push_back({{"seq_len", L}, {"loss", e.loss}, {"perplexity", e.perplexity}, {"accuracy", e.accuracy},
                       {"tokens", e.tokens}, {"step", run.step}});
        else
          fmt::print("seq_len {:>5}: loss {:.4f}  perplexity {:.3f}  accuracy {:.4f}  ({} tokens, step {})\n", L,
                     e.loss, e.perplexity, e.accuracy, e.tokens, run.step);
      }
      if (eval_json) fmt::print("{}\n", j.dump());
      return 0;
    }
    if (*sample_cmd) {
      relpos::train::LoadedRun run = relpos::train::load_run(sample_dir);
      fmt::print("{}\n", relpos::train::sample(run, sample_opt));
      return 0;
    }
    if (*list_cmd) {
      for (const auto& v : relpos::nn::position_variants())
        fmt::print("{:<15} {}{}\n", v.name, v.description, v.causal_capable ? "" : " [encoder only]");
      return 0;
    }
    if (*bias_cmd) {
      bias.causal = bias_causal;
      bias.identity_table = table_mode == "identity";
      bias.params = parse_params(bias_params);
      // H * Lq * Lk values are printed: bounded (each factor is capped, so no overflow here).
      if (bias.heads * bias.lq * bias.lk > relpos::train::kMaxBiasCells)
        throw UsageError(fmt::format("bias: --heads {} x --lq {} x --lk {} = {} values, more than the {} it prints",
                                     bias.heads, bias.lq, bias.lk, bias.heads * bias.lq * bias.lk,
                                     relpos::train::kMaxBiasCells));
      return run_bias(bias, bias_json);
    }
    if (*gc_cmd) {
      bool ok = true;
      auto cases = relpos::inspect::attention_gradchecks(gc_type, parse_params(gc_params));
      for (const auto& c : cases) {
        ok = ok && c.report.ok;
        fmt::print("{:<6} {:<55} worst |analytic - numeric| {:.2e} (score {:.2e}, {} elements)\n",
                   c.report.ok ? "ok" : "FAIL", c.label, c.report.abs_err, c.report.score, c.report.elements);
        if (!c.report.ok) fmt::print("       {}\n", c.report.str());
      }
      fmt::print("{} passed, {} failed\n", std::count_if(cases.begin(), cases.end(), [](auto& c) { return c.report.ok; }),
                 std::count_if(cases.begin(), cases.end(), [](auto& c) { return !c.report.ok; }));
      return ok ? 0 : 1;
    }
    if (*demo_cmd) {
      auto r = relpos::demo::train_char_mlp(demo, [](const std::string& s) {
        fmt::print("{}\n", s);
        std::fflush(stdout);
      });
      fmt::print("unigram baseline val loss {:.4f}; final val loss {:.4f} ({:.1f} s)\n", r.unigram_val_loss,
                 r.final_val_loss, r.seconds);
      fmt::print("sample:\n{}\n", r.sample);
      return 0;
    }
  } catch (const UsageError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  } catch (const relpos::ConfigError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  } catch (const relpos::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "error: out of memory (an allocation failed); reduce the sizes in the config or free memory\n");
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "internal error: {}\n", e.what());
    return 1;
  }
  return 0;
}
