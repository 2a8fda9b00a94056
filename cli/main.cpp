// cli/main.cpp — the relpos executable.
//   relpos train CONFIG [--set k=v ...] [--resume DIR] [--overwrite] [--ignore-memory-check]
//                                                      train from a YAML config
//   relpos eval RUN_DIR [--seq-len N ...] [--mode random|windows|sliding] [--stride S]
//               [--bucket W] [--rope-scaling linear|ntk|yarn --rope-factor F] [--json]
//                                                      loss per length, per position bucket, beyond training length
//   relpos sweep SPEC.yaml [--jobs N] [--dir D]        grid of runs (trainers/sweep.h), resumable
//               [--shard I/N | --point I|NAME] [--print-commands]
//                                                      a shard / one point of it; one command per point
//   relpos inspect RUN_DIR [--out D] [--text T]        learned bias vs distance, per-row position gradients,
//                                                      attention maps, DOT graph of one attention layer
//   relpos gradcheck --type T --entry [NAME] [--index i,j]  analytic vs numeric for one parameter entry
//   relpos report RUN_DIR|SWEEP_DIR [--out D]          Markdown report + PNG figures (scripts/report.py)
//   relpos sample RUN_DIR [--prompt T] [--tokens N]     generate with the KV cache (decoders)
//   relpos validate CONFIG [--set k=v ...]             check a config without training
//   relpos demo [--steps N] [--data PATH] ...          the char-MLP demo
//   relpos list [--params [--markdown]]                registered position encodings (and their parameters)
//   relpos bias --type NAME --heads H --lq N --lk M    the bias a fresh encoding adds [H][Lq][Lk]
//   relpos gradcheck [--type NAME|all]                 float64 gradcheck of attention + encoding
//   relpos info                                        version, commit, build, BLAS, threads, CUDA devices
//   relpos --version                                   version and git commit
// Exit codes: 0 ok, 2 usage or config error (including a config that does not fit in memory),
// 1 runtime failure (a failed gradcheck, a damaged checkpoint, an I/O error, out of memory).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>
#include <tuple>

#include "relpos/core/cuda_runtime.h"
#include "relpos/nn/positional/param_docs.h"
#include "relpos/version.h"
#include "relpos_build_info.h"
#include "relpos/core/error.h"
#include "relpos/kernels/ops.h"
#include "relpos/nn/positional/registry.h"
#include "relpos/trainers/data.h"
#include "relpos/trainers/data_tasks.h"
#include "relpos/trainers/demo.h"
#include "relpos/trainers/evaluate.h"
#include "relpos/trainers/file_io.h"
#include "relpos/trainers/inspect_run.h"
#include "relpos/trainers/sweep.h"
#include "relpos/trainers/comm.h"
#ifdef RELPOS_WITH_MPI
#include "relpos/trainers/mpi/comm_mpi.h"
#endif
#include "relpos/trainers/limits.h"
#include "relpos/trainers/inspect.h"
#include "relpos/trainers/trainer.h"

namespace {

#if defined(RELPOS_BLAS_IS_OPENBLAS)
extern "C" char* openblas_get_config(void);
extern "C" int openblas_get_parallel(void);
#endif

std::string blas_description() {
#if defined(RELPOS_BLAS_IS_OPENBLAS)
  const int par = openblas_get_parallel();
  return fmt::format("{} ({}; threading: {})", RELPOS_BLAS_VENDOR, openblas_get_config(),
                     par == 0 ? "sequential" : par == 1 ? "pthreads" : par == 2 ? "OpenMP" : "unknown");
#else
  return fmt::format("{} ({})", RELPOS_BLAS_VENDOR, RELPOS_BLAS_LIBRARIES);
#endif
}

void print_info() {
  const relpos::k::BlasCore& core = relpos::k::ensure_blas_core();  // before the BLAS line: it names the core
  fmt::print("relpos {}\n", RELPOS_VERSION);
  fmt::print("git commit:   {}\n", RELPOS_GIT_COMMIT);
  fmt::print("build type:   {}{}\n", RELPOS_BUILD_TYPE,
             std::string(RELPOS_NATIVE_BUILD) == "ON" ? " (-march=native)" : "");
  fmt::print("compiler:     {} (C++{})\n", RELPOS_COMPILER, __cplusplus / 100 % 100);
  fmt::print("BLAS:         {}\n", blas_description());
  fmt::print("BLAS library: {}\n", RELPOS_BLAS_LIBRARIES);
  static const char* const kTier[] = {"SSE", "AVX", "AVX2+FMA", "AVX-512"};
  if (core.library == "OpenBLAS")
    fmt::print("BLAS core:    {} ({} kernels; CPU: {}){}\n", core.core, kTier[core.core_tier()], kTier[core.cpu_tier],
               core.note.empty() ? "" : "; " + core.note);
  fmt::print("CPU threads:  {} (OpenMP)\n", relpos::k::num_threads());
  fmt::print("CUDA:         {}\n", relpos::cuda::built_with_cuda()
                                        ? fmt::format("built; {}; {}", relpos::cuda::runtime_version(),
                                                      relpos::k::cuda_library_info())
                                        : std::string("not built"));
#ifdef RELPOS_WITH_MPI
  fmt::print("MPI:          built; {} (data-parallel: mpirun -np N relpos train)\n", relpos::train::mpi_library_version());
#else
  fmt::print("MPI:          built without (RELPOS_MPI=OFF)\n");
#endif
  const auto devs = relpos::cuda::devices();
  fmt::print("CUDA devices: {}\n", devs.size());
  for (const auto& d : devs)
    fmt::print("  cuda:{}  {}  compute capability {}.{}, {} SMs, {:.1f} GiB ({:.1f} GiB free)\n", d.index, d.name,
               d.cc_major, d.cc_minor, d.multiprocessors, double(d.total_memory) / double(1ull << 30),
               double(d.free_memory) / double(1ull << 30));
}

struct UsageError : relpos::Error {
  using relpos::Error::Error;
};

// A word for sh: as is when it holds only characters no shell treats specially, else in single
// quotes (an embedded ' becomes '\'').
std::string shell_quote(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_-./+=:,@%").find(c) != std::string_view::npos;
  });
  if (plain) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

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

std::string fmt_loss(double v) { return std::isfinite(v) ? fmt::format("{:.4f}", v) : std::string("-"); }
nlohmann::json json_num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

int print_eval(const relpos::train::LoadedRun& run, const std::vector<int64_t>& lens,
               const relpos::train::EvalOptions& base, const std::string& note, bool json) {
  nlohmann::json j = nlohmann::json::array();
  for (int64_t L : lens) {
    relpos::train::EvalOptions o = base;
    o.seq_len = L;
    auto e = relpos::train::evaluate_positions(*run.model, *run.data, run.cfg, o);
    // A non-finite loss is a failure, never a result.
    if (!std::isfinite(e.loss))
      throw relpos::Error(fmt::format("eval {}: the loss at seq_len {} is {} (the model's outputs are not finite)",
                                      run.checkpoint, L, e.loss));
    if (json) {
      nlohmann::json bj = nlohmann::json::array();
      for (auto& b : e.buckets) bj.push_back({{"lo", b.lo}, {"hi", b.hi}, {"loss", json_num(b.loss)}, {"tokens", b.tokens}});
      nlohmann::json row = {{"seq_len", L}, {"mode", e.mode}, {"loss", e.loss}, {"perplexity", e.perplexity},
                            {"accuracy", e.accuracy}, {"tokens", e.tokens}, {"windows", e.windows},
                            {"train_len", e.train_len}, {"beyond_loss", json_num(e.beyond_loss)},
                            {"beyond_tokens", e.beyond_tokens}, {"buckets", bj}, {"step", run.step}};
      if (e.mode == "sliding") row["stride"] = e.stride;
      if (e.mode == "segments") row["mem_len"] = e.stride;
      if (!note.empty()) row["position_setting"] = note;
      j.push_back(row);
      continue;
    }
    std::string mode = e.mode == "random"    ? fmt::format("random windows ({} sequences)", e.windows)
                       : e.mode == "windows" ? fmt::format("non-overlapping windows ({} windows)", e.windows)
                       : e.mode == "segments"
                           ? fmt::format("segments with memory {} ({} batches)", e.stride, e.windows)
                                             : fmt::format("sliding window, stride {} ({} windows)", e.stride, e.windows);
    fmt::print("seq_len {:>5}, mode {}{}: loss {:.4f}  perplexity {:.3f}  accuracy {:.4f}  ({} tokens, step {})\n", L,
               mode, note.empty() ? "" : ", " + note, e.loss, e.perplexity, e.accuracy, e.tokens, run.step);
    for (auto& b : e.buckets)
      fmt::print("    positions {:>5}-{:<5}  loss {:>8}  ({} tokens)\n", b.lo, b.hi - 1, fmt_loss(b.loss), b.tokens);
    fmt::print("    positions >= {} (beyond the training length): loss {}  ({} tokens)\n", e.train_len,
               fmt_loss(e.beyond_loss), e.beyond_tokens);
  }
  if (json) fmt::print("{}\n", j.dump());
  return 0;
}

// CLI11 validators. PositiveNumber accepts "nan" (as 1) and a uint64 option clamps an
// out-of-range value: both would run with a number the user did not give.
std::string finite_positive(const std::string& text) {
  double v = 0;
  try {
    size_t used = 0;
    v = std::stod(text, &used);
    if (used != text.size()) return fmt::format("'{}' is not a number", text);
  } catch (const std::exception&) {
    return fmt::format("'{}' is not a number", text);
  }
  return std::isfinite(v) && v > 0 ? std::string() : fmt::format("'{}': expected a finite number > 0", text);
}

std::string uint64_text(const std::string& text) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) return fmt::format("'{}' is larger than 2^64 - 1", text);
  if (ec != std::errc() || end != text.data() + text.size())
    return fmt::format("'{}': expected an integer 0 .. 18446744073709551615", text);
  return {};
}

// `relpos inspect`: prints a summary and writes inspect.json (+ attention_layer0.dot).
int run_inspect(const std::string& dir, std::string out, const std::string& text, int64_t n) {
  relpos::train::LoadedRun run = relpos::train::load_run(dir);
  if (out.empty()) out = dir + "/inspect";
  std::filesystem::create_directories(out);
  relpos::DirLock lock(out, "inspect output folder");  // one inspect at a time writes there
  nlohmann::json j;
  j["run"] = dir;
  j["checkpoint"] = run.checkpoint;
  j["step"] = run.step;
  j["position"] = run.cfg.model.position;
  fmt::print("{} (step {}), position encoding {}\n", run.checkpoint, run.step, run.cfg.model.position);
  std::string note;
  auto curves = relpos::train::learned_bias(*run.model, n, &note);
  j["bias"] = nlohmann::json::array();
  for (auto& c : curves) {
    j["bias"].push_back({{"layer", c.layer}, {"head", c.head}, {"distance", c.distance}, {"bias", c.bias}});
    fmt::print("bias layer {} head {}: d=0 {:+.3f}  d=-1 {:+.3f}  d=-{} {:+.3f}  d=-{} {:+.3f}\n", c.layer, c.head,
               c.bias[0], c.bias[1], n / 4, c.bias[size_t(n / 4)], n - 1, c.bias.back());
  }
  if (!note.empty()) fmt::print("bias: {}\n", note), j["bias_note"] = note;
  auto rows = relpos::train::position_grad_rows(*run.model, *run.data, run.cfg.train.seed + 1);
  j["position_grad_rows"] = nlohmann::json::array();
  for (auto& r : rows) {
    nlohmann::json row = {{"param", r.param}, {"shape", r.shape}, {"row_norm", r.row_norm}};
    if (!r.row_distances.empty()) {  // [min, max] of kj - qi per row, null: no distance in the probe
      nlohmann::json d = nlohmann::json::array();
      for (const auto& o : r.row_distances)
        d.push_back(o ? nlohmann::json::array({o->first, o->second}) : nlohmann::json(nullptr));
      row["row_distance"] = d;
      row["train_distance"] = r.train_distance;
      row["probe_distance"] = r.probe_distance;
    }
    j["position_grad_rows"].push_back(row);
    auto mx = *std::max_element(r.row_norm.begin(), r.row_norm.end());
    int64_t starving = std::count_if(r.row_norm.begin(), r.row_norm.end(), [&](double v) { return v < 1e-3 * mx; });
    fmt::print("grad per row of {} {}: max {:.3e}, {} of {} rows below 1e-3 x max\n", r.param,
               fmt::format("[{}]", fmt::join(r.shape, ", ")), mx, starving, r.row_norm.size());
  }
  if (run.cfg.model.kind == "decoder" && relpos::train::find_data_task(run.cfg.data.task).text) {
    std::vector<int64_t> ids = run.data->encode(text);
    if (ids.empty() || int64_t(ids.size()) > relpos::train::kMaxInspectTokens)
      throw UsageError(fmt::format("inspect --text: {} tokens; expected 1 to {} (the attention maps are L x L per head "
                                   "and layer)", ids.size(), relpos::train::kMaxInspectTokens));
    auto maps = relpos::train::attention_maps(*run.model, relpos::Tensor::from_vector(ids, {1, int64_t(ids.size())}));
    j["attention"] = {{"text", text}, {"tokens", ids.size()}, {"layers", nlohmann::json::array()}};
    for (auto& m : maps) {
      const int64_t H = m.size(0), L = m.size(1);
      auto v = m.to_vector<double>();  // final [H, L, L] result, copied once for the report
      nlohmann::json hs = nlohmann::json::array();
      for (int64_t h = 0; h < H; ++h) {
        nlohmann::json rowsj = nlohmann::json::array();
        for (int64_t i = 0; i < L; ++i)
          rowsj.push_back(std::vector<double>(v.begin() + (h * L + i) * L, v.begin() + (h * L + i + 1) * L));
        hs.push_back(rowsj);
      }
      j["attention"]["layers"].push_back(hs);
    }
    fmt::print("attention maps: {} layers x {} heads for {} tokens\n", maps.size(), run.cfg.model.n_heads, ids.size());
  }
  {  // encodings that look their bias up by an index (graph_spd) take it from a data batch
    relpos::Tensor index;
    int64_t L = 6;
    relpos::Generator g(run.cfg.train.seed + 2);
    if (relpos::train::Batch b = run.data->train_batch(g); b.position_index.defined()) {
      index = b.position_index.dim() == 3 ? b.position_index.select(0, 0).contiguous() : b.position_index;
      L = index.size(-1);
    }
    relpos::replace_file_atomically(out + "/attention_layer0.dot",
                                    relpos::train::attention_graph_dot(*run.model, L, 0, index));
  }
  relpos::replace_file_atomically(out + "/inspect.json", j.dump() + "\n");  // checked: a full disk is an error
  fmt::print("wrote {}/inspect.json and {}/attention_layer0.dot (dot -Tpng)\n", out, out);
  return 0;
}

// `relpos report`: runs scripts/report.py (matplotlib) with /usr/bin/python3 ($RELPOS_PYTHON). The script is
// found next to the executable's source tree (RELPOS_SOURCE_DIR) or via $RELPOS_REPORT_SCRIPT.
int run_report(const std::string& dir, const std::string& out) {
  std::string script = std::getenv("RELPOS_REPORT_SCRIPT") ? std::getenv("RELPOS_REPORT_SCRIPT")
                                                           : std::string(RELPOS_SOURCE_DIR) + "/scripts/report.py";
  if (!std::filesystem::exists(script)) throw relpos::Error(fmt::format("report: script '{}' not found", script));
  if (!std::filesystem::is_directory(dir)) throw UsageError(fmt::format("report: '{}' is not a directory", dir));
  auto quote = [](const std::string& s) { return shell_quote(s); };
  // Debian's matplotlib lives with the system interpreter; $RELPOS_PYTHON overrides.
  std::string py = std::getenv("RELPOS_PYTHON")                     ? std::getenv("RELPOS_PYTHON")
                   : std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3"
                                                                     : "python3";
  std::string cmd = quote(py) + " " + quote(script) + " " + quote(dir) + (out.empty() ? "" : " --out " + quote(out));
  std::fflush(stdout);
  int rc = std::system(cmd.c_str());
  if (rc != 0) throw relpos::Error(fmt::format("report: '{}' failed (status {})", cmd, rc));
  return 0;
}

// The communicator of a data-parallel `relpos train` (null otherwise).
std::unique_ptr<relpos::train::Communicator> g_comm;

// Prints "<kind>: <what>" and returns the exit status; in a data-parallel run the message
// names the rank and the whole job stops with that status (no rank is left waiting).
int report_error(int code, const char* kind, const std::string& what) {
  if (g_comm && g_comm->size() > 1)
    g_comm->abort(code, fmt::format("{} (rank {} of {}): {}", kind, g_comm->rank(), g_comm->size(), what));
  fmt::print(stderr, "{}: {}\n", kind, what);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"relpos — train small transformers with relative position encodings"};
  app.require_subcommand(0, 1);
  bool show_version = false;
  app.add_flag("--version", show_version, "print the version and git commit");

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
  bool list_params = false, list_markdown = false;
  list_cmd->add_flag("--params", list_params, "also print each encoding's parameters (type, default, meaning)");
  list_cmd->add_flag("--markdown", list_markdown, "with --params: the Markdown table of docs/config.md");

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
  std::string gc_entry;
  std::vector<int64_t> gc_index;
  auto* gc_entry_opt = gc_cmd->add_option("--entry", gc_entry,
                                          "print analytic vs numeric gradient of one entry of this parameter "
                                          "(e.g. pos.table; empty: the first position table)")
                           ->expected(0, 1);
  gc_cmd->add_option("--index", gc_index, "the entry's index (comma separated), default all zeros")->delimiter(',');

  std::string inspect_dir, inspect_out, inspect_text = "ROMEO:\nWhat light through yonder window breaks?";
  int64_t inspect_n = 32;
  auto* inspect_cmd = app.add_subcommand("inspect", "what a trained model's position encoding learned");
  inspect_cmd->add_option("run_dir", inspect_dir, "run directory or checkpoint directory")->required();
  inspect_cmd->add_option("--out", inspect_out, "output directory (default RUN_DIR/inspect)");
  inspect_cmd->add_option("--text", inspect_text, "input for the attention maps (text runs)");
  inspect_cmd->add_option("--distances", inspect_n, "bias curve over distances 0 .. -(N-1)")
      ->check(CLI::Range(int64_t(1), relpos::train::kMaxInspectDistances))->capture_default_str();

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
  train_cmd->add_flag("--ignore-memory-check", ignore_memory, "train even when the memory estimate exceeds the available memory (MemAvailable, cgroup limits)");

  std::string validate_config;
  auto* validate_cmd = app.add_subcommand("validate", "check a config (and its --set overrides) without training");
  validate_cmd->add_option("config", validate_config, "YAML config file")->required();
  validate_cmd->add_option("--set", sets, "override a config value (repeatable)");
  validate_cmd->add_flag("--ignore-memory-check", ignore_memory, "report the memory estimate without refusing");

  std::string eval_dir;
  std::vector<int64_t> eval_lens;
  bool eval_json = false;
  relpos::train::EvalOptions eval_opt;
  std::string rope_scaling;
  double rope_factor = 0;
  auto* eval_cmd = app.add_subcommand("eval", "evaluate a trained run on its validation data");
  eval_cmd->add_option("run_dir", eval_dir, "run directory or checkpoint directory")->required();
  eval_cmd->add_option("--seq-len", eval_lens, "evaluate at these sequence lengths (default: the training length)")
      ->check(CLI::Range(int64_t(1), relpos::train::kMaxLen));
  eval_cmd->add_option("--mode", eval_opt.mode,
                       "random: eval_batches random windows; windows: consecutive non-overlapping windows; sliding: "
                       "windows advanced by --stride, scoring only the last stride tokens (text decoders)")
      ->check(CLI::IsMember({"random", "windows", "sliding", "segments"}))->capture_default_str();
  eval_cmd->add_option("--mem-len", eval_opt.mem_len,
                       "segments: Transformer-XL memory length (default: the run's model.mem_len)")
      ->check(CLI::NonNegativeNumber);
  eval_cmd->add_option("--stride", eval_opt.stride, "sliding: tokens scored per window (default seq_len / 2)")
      ->check(CLI::PositiveNumber);
  eval_cmd->add_option("--bucket", eval_opt.bucket, "position bucket width (default: the training length)")
      ->check(CLI::PositiveNumber);
  eval_cmd->add_option("--max-tokens", eval_opt.max_tokens,
                       "windows/sliding: score at most N tokens (default eval_batches x batch_size x train length)")
      ->check(CLI::PositiveNumber);
  auto* rs_opt = eval_cmd->add_option("--rope-scaling", rope_scaling, "RoPE runs: context scaling at evaluation time")
                     ->check(CLI::IsMember({"none", "linear", "ntk", "yarn"}));
  eval_cmd->add_option("--rope-factor", rope_factor, "RoPE scaling factor (e.g. eval length / train length)")
      ->check(finite_positive)->needs(rs_opt);
  eval_cmd->add_flag("--ignore-memory-check", ignore_memory, "evaluate even when the memory estimate exceeds the available memory (MemAvailable, cgroup limits)");
  eval_cmd->add_flag("--json", eval_json, "print JSON");

  std::string sweep_spec;
  relpos::train::SweepOptions sweep_opt;
  auto* sweep_cmd = app.add_subcommand("sweep", "run a grid of training runs from a sweep spec (resumable)");
  sweep_cmd->add_option("spec", sweep_spec, "sweep spec YAML (see trainers/sweep.h, docs/config.md)")->required();
  sweep_cmd->add_option("--jobs", sweep_opt.jobs, "points run at once (threads are split between them)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  sweep_cmd->add_option("--dir", sweep_opt.dir, "sweep directory (default: the spec's dir)");
  int64_t sweep_max_points = relpos::train::kDefaultMaxSweepPoints;
  sweep_cmd->add_option("--max-points", sweep_max_points, "refuse a sweep with more points than this")
      ->check(CLI::Range(int64_t(1), relpos::train::kMaxSweepPoints))->capture_default_str();
  std::string sweep_shard, sweep_point;
  bool sweep_print = false;
  sweep_cmd->add_option("--shard", sweep_shard,
                        "I/N: run only the points i with i mod N == I (0 <= I < N); shards may run at once, "
                        "into one directory, each with its own index file sweep.shard-I-of-N.jsonl");
  sweep_cmd->add_option("--point", sweep_point,
                        "run only this point (its index, 0-based, or its name); index file sweep.point-I.jsonl");
  sweep_cmd->add_flag("--print-commands", sweep_print,
                      "print one shell command per point (this sweep with --point I) and exit without running "
                      "anything (for GNU parallel or a Slurm job array)");

  std::string report_dir, report_out;
  auto* report_cmd = app.add_subcommand("report", "write a Markdown report with PNG figures for a run or a sweep");
  report_cmd->add_option("dir", report_dir, "run directory or sweep directory")->required();
  report_cmd->add_option("--out", report_out, "output directory (default: DIR/report)");

  std::string sample_dir;
  relpos::train::SampleOptions sample_opt;
  auto* sample_cmd = app.add_subcommand("sample", "generate from a trained decoder (KV cache)");
  sample_cmd->add_option("run_dir", sample_dir, "run directory or checkpoint directory")->required();
  sample_cmd->add_option("--prompt", sample_opt.prompt, "text to continue");
  sample_cmd->add_option("--tokens", sample_opt.tokens, "tokens to generate")
      ->check(CLI::Range(int64_t(1), relpos::train::kMaxSampleTokens))->capture_default_str();
  sample_cmd->add_option("--temperature", sample_opt.temperature, "sampling temperature (0 = greedy)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  sample_cmd->add_option("--seed", sample_opt.seed, "sampling seed (0 .. 2^64 - 1)")
      ->check(uint64_text)->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (show_version) {
    fmt::print("relpos {} (commit {})\n", RELPOS_VERSION, RELPOS_GIT_COMMIT);
    return 0;
  }
  if (app.get_subcommands().empty()) {
    fmt::print(stderr, "{}\nerror: a subcommand is required\n", app.help());
    return 2;
  }
  try {
    if (threads > 0) relpos::k::set_num_threads(threads);
    if (*info_cmd) {
      print_info();
      return 0;
    }
    if (*validate_cmd) {
      relpos::train::Config c = relpos::train::load_config(validate_config, sets);
      // What train checks before it starts: the data file (exists, readable, UTF-8) and memory.
      int64_t vocab = c.model.vocab;
      if (relpos::train::find_data_task(c.data.task).text) {
        const std::string bytes = relpos::train::read_text_file(c.data.path);
        vocab = int64_t(relpos::train::distinct_chars(
                            relpos::train::utf8_char_views(bytes, fmt::format("data file '{}'", c.data.path)))
                            .size());
      }
      relpos::train::ResourceEstimate est = relpos::train::estimate_resources(c, vocab);
      relpos::train::check_memory(est, ignore_memory, "validate");
      fmt::print("{}: ok ({} {} with {} position encoding, task {}, {} steps; {} parameters, estimated memory {})\n",
                 validate_config, c.model.kind, fmt::format("d_model {} x {} layers", c.model.d_model, c.model.n_layers),
                 c.model.position, c.data.task, c.train.steps, est.parameters, est.str());
      return 0;
    }
    if (*train_cmd) {
      // Started by mpirun (or srun with PMI): one rank of a data-parallel run.
      if (const int n = relpos::train::launcher_world_size(); n > 1) {
#ifdef RELPOS_WITH_MPI
        g_comm = relpos::train::make_mpi_communicator();
#else
        throw relpos::ConfigError(fmt::format(
            "started by an MPI launcher with {} processes, but this relpos was built without MPI; install "
            "libopenmpi-dev (scripts/install-deps.sh) and rebuild (CMake option RELPOS_MPI)", n));
#endif
      }
      relpos::train::Config c = relpos::train::load_config(train_config, sets);
      relpos::train::TrainOptions to;
      to.comm = g_comm.get();
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
      if (g_comm && g_comm->rank() != 0) return 0;  // rank 0 reports and samples
      // Only what was measured: the last evaluation's step when it was not the last step.
      const std::string val = r.final_val_step < 0 ? std::string("no evaluation ran")
                              : r.final_val_step == r.steps_done
                                  ? fmt::format("val loss {:.4f}", r.final_val_loss)
                                  : fmt::format("val loss {:.4f} (step {}, the last evaluation)", r.final_val_loss,
                                                r.final_val_step);
      fmt::print("done: {} steps in {:.1f} s; final train loss {:.4f}, {}{}; run in {}\n", r.steps_done, r.seconds,
                 r.final_train_loss, val, r.skipped_steps ? fmt::format(" ({} steps skipped)", r.skipped_steps) : "",
                 r.run_dir);
      if (c.model.kind == "decoder" && relpos::train::find_data_task(c.data.task).text) {
        relpos::train::LoadedRun run = relpos::train::load_run(r.run_dir);
        relpos::train::SampleOptions so;
        // a line break where the text has one, else its first character (a one-line text has no '\n')
        const std::vector<std::string> vocab = run.data->vocabulary();
        so.prompt = std::find(vocab.begin(), vocab.end(), "\n") != vocab.end() || vocab.empty() ? "\n" : vocab.front();
        so.tokens = 200;
        so.temperature = 0.8;
        fmt::print("sample:\n{}\n", relpos::train::sample(run, so));
      }
      return 0;
    }
    if (*eval_cmd) {
      relpos::train::LoadedRun run = relpos::train::load_run(eval_dir);
      if (eval_lens.empty()) eval_lens.push_back(run.cfg.data.seq_len);
      for (int64_t L : eval_lens)
        relpos::train::check_memory(relpos::train::estimate_resources(run.cfg, run.data->vocab_size(), L), ignore_memory,
                                    fmt::format("eval --seq-len {}", L));
      std::string scaling_note;
      if (!rope_scaling.empty()) {
        const auto& docs = relpos::nn::position_param_docs(run.cfg.model.position);
        if (std::none_of(docs.begin(), docs.end(), [](const auto& d) { return d.name == "scaling"; }))
          throw UsageError(fmt::format("--rope-scaling: this run uses position encoding '{}', which has no 'scaling' "
                                       "parameter (rope has)", run.cfg.model.position));
        std::map<std::string, std::string> st{{"scaling", rope_scaling}};
        if (rope_factor > 0) st["factor"] = fmt::format("{}", rope_factor);
        run.model = relpos::train::with_position_settings(*run.model, run.cfg, st);
        scaling_note = fmt::format("rope scaling {} factor {}", rope_scaling,
                                   run.cfg.model.position_params.get_double("factor", 1.0));
      }
      return print_eval(run, eval_lens, eval_opt, scaling_note, eval_json);
    }
    if (*sweep_cmd) {
      relpos::train::SweepSpec spec = relpos::train::load_sweep_spec(sweep_spec, sweep_max_points);
      if (!sweep_shard.empty()) std::tie(sweep_opt.shard_index, sweep_opt.shard_count) = relpos::train::parse_shard(sweep_shard);
      if (!sweep_point.empty()) {
        if (!sweep_shard.empty()) throw UsageError("--point and --shard: give one of them, not both");
        sweep_opt.point = relpos::train::find_point(spec, sweep_point);
      }
      if (sweep_print) {
        // One line per point of the selection: the binary as invoked, the same global options,
        // spec and --dir, and --point I; each line skips its point when it is already done.
        std::string prefix = shell_quote(argv[0]);
        if (threads > 0) prefix += fmt::format(" --threads {}", threads);
        prefix += " sweep " + shell_quote(sweep_spec);
        if (!sweep_opt.dir.empty()) prefix += " --dir " + shell_quote(sweep_opt.dir);
        for (int64_t i : relpos::train::selected_points(spec, sweep_opt)) fmt::print("{} --point {}\n", prefix, i);
        return 0;
      }
      sweep_opt.threads = threads;
      sweep_opt.log = [](const std::string& s) {
        fmt::print("{}{}", s, (!s.empty() && s.back() == '\n') ? "" : "\n");
        std::fflush(stdout);
      };
      auto r = relpos::train::run_sweep(spec, sweep_opt);
      fmt::print("\n{}sweep: {} points run, {} skipped, {:.1f} s; index {}\n", r.summary, r.ran, r.skipped, r.seconds,
                 r.index_file);
      if (r.failed == 0) return 0;
      // The other points still ran; a script must still see that not everything did.
      fmt::print(stderr, "error: sweep: {} of {} points run failed (each one's \"error\" is in {})\n", r.failed, r.ran,
                 r.index_file);
      return 1;
    }
    if (*report_cmd) return run_report(report_dir, report_out);
    if (*sample_cmd) {
      relpos::train::LoadedRun run = relpos::train::load_run(sample_dir);
      fmt::print("{}\n", relpos::train::sample(run, sample_opt));
      return 0;
    }
    if (*list_cmd) {
      if (list_markdown && !list_params) throw UsageError("--markdown needs --params");
      if (list_markdown) {
        fmt::print("{}", relpos::nn::position_params_markdown());
        return 0;
      }
      for (const auto& v : relpos::nn::position_variants()) {
        fmt::print("{:<15} {}{}{}\n", v.name, v.description, v.causal_capable ? "" : " [encoder only]",
                   list_params && v.per_layer ? " [per layer by default]" : "");
        if (!list_params) continue;
        for (const auto& d : relpos::nn::position_param_docs(v.name))
          fmt::print("    {:<24} {:<30} default {:<20} {}\n", d.name, d.type, d.default_value, d.meaning);
      }
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
    if (*gc_cmd && *gc_entry_opt) {
      if (gc_type == "all") throw UsageError("gradcheck --entry needs one --type");
      auto r = relpos::train::entry_gradcheck(gc_type, parse_params(gc_params), gc_entry, gc_index);
      const double err = std::abs(r.analytic - r.numeric);
      fmt::print("{} attention layer (float64, causal, L 6), parameter {}[{}]\n  analytic {:+.10e}\n  numeric  "
                 "{:+.10e}   (central difference, eps 1e-6)\n  |difference| {:.2e}\n",
                 gc_type, r.param, fmt::join(r.index, ","), r.analytic, r.numeric, err);
      return err <= 1e-6 + 1e-5 * std::abs(r.numeric) ? 0 : 1;
    }
    if (*inspect_cmd) return run_inspect(inspect_dir, inspect_out, inspect_text, inspect_n);
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
    return report_error(2, "error", e.what());
  } catch (const relpos::ConfigError& e) {
    return report_error(2, "error", e.what());
  } catch (const relpos::Error& e) {
    return report_error(1, "error", e.what());
  } catch (const std::bad_alloc&) {
    return report_error(1, "error", "out of memory (an allocation failed); reduce the sizes in the config or free memory");
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that the file system refuses (a symlink loop, a file where a
    // directory is needed, no permission): the path and the system's reason, not a bug.
    std::string paths = e.path1().empty() ? "" : " '" + e.path1().string() + "'";
    if (!e.path2().empty()) paths += " -> '" + e.path2().string() + "'";
    return report_error(1, "error", fmt::format("file system:{} {}", paths, e.code().message()));
  } catch (const std::exception& e) {
    return report_error(1, "internal error", e.what());
  }
  return 0;
}
