// relpos inspect RUN_DIR [--out D] [--text T] [--distances N]
// What a trained model's position encoding learned: the bias against distance, the gradient
// per row of each position table, attention maps of a text, and a DOT graph of one attention
// layer. Prints a summary; writes D/inspect.json and D/attention_layer0.dot.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "trainers/config.h"
#include "experiments/inspect_run.h"
#include "trainers/io/file_io.h"
#include "trainers/limits.h"
#include "trainers/trainer.h"

namespace relpos::cli {
namespace {

struct Args {
  std::string dir, out, text;  // text: kDefaultText, or a validation window where that does not apply
  CLI::Option* text_opt = nullptr;
  int64_t distances = 32;
};

nlohmann::json bias_curves(const train::LoadedRun& run, int64_t n) {
  std::string note;
  nlohmann::json j = nlohmann::json::array();
  for (const auto& c : train::learned_bias(*run.model, n, &note)) {
    j.push_back({{"layer", c.layer}, {"head", c.head}, {"distance", c.distance}, {"bias", c.bias}});
    fmt::print("bias layer {} head {}: d=0 {:+.3f}  d=-1 {:+.3f}  d=-{} {:+.3f}  d=-{} {:+.3f}\n", c.layer, c.head,
               c.bias[0], c.bias[1], n / 4, c.bias[size_t(n / 4)], n - 1, c.bias.back());
  }
  if (!note.empty()) fmt::print("bias: {}\n", note);
  return {{"bias", j}, {"note", note}};
}

nlohmann::json grad_rows(const train::LoadedRun& run) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : train::position_grad_rows(*run.model, *run.data, run.cfg.train.seed + 1)) {
    nlohmann::json row = {{"param", r.param}, {"shape", r.shape}, {"row_norm", r.row_norm}};
    if (!r.row_distances.empty()) {  // [min, max] of kj - qi per row, null: no distance in the probe
      nlohmann::json d = nlohmann::json::array();
      for (const auto& o : r.row_distances)
        d.push_back(o ? nlohmann::json::array({o->first, o->second}) : nlohmann::json(nullptr));
      row["row_distance"] = d;
      row["train_distance"] = r.train_distance;
      row["probe_distance"] = r.probe_distance;
    }
    j.push_back(row);
    const double mx = *std::max_element(r.row_norm.begin(), r.row_norm.end());
    const auto starving = std::count_if(r.row_norm.begin(), r.row_norm.end(), [&](double v) { return v < 1e-3 * mx; });
    fmt::print("grad per row of {} {}: max {:.3e}, {} of {} rows below 1e-3 x max\n", r.param,
               fmt::format("[{}]", fmt::join(r.shape, ", ")), mx, starving, r.row_norm.size());
  }
  return j;
}

// Convolution kernels among the position parameters (cpe's depthwise [C, k, k]): per kernel the
// mean |w| of each tap over the channels and the first channels' kernels, for the report's
// heatmaps; the summary prints the mean |w| grid.
nlohmann::json conv_kernels(const train::LoadedRun& run) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& p : run.model->named_parameters_with_groups()) {
    const Variable& v = p.param;
    if (p.group != nn::group::kPosition || v.dim() != 3 || v.size(1) != v.size(2)) continue;
    const int64_t C = v.size(0), k = v.size(1);
    const std::vector<double> w = v.data().to(Device::CPU).contiguous().to_vector<double>();
    auto at = [&](int64_t c, int64_t u, int64_t t) { return w[size_t((c * k + u) * k + t)]; };
    nlohmann::json mean = nlohmann::json::array(), channels = nlohmann::json::array();
    for (int64_t u = 0; u < k; ++u) {
      std::vector<double> row(size_t(k), 0.0);
      for (int64_t t = 0; t < k; ++t) {
        for (int64_t c = 0; c < C; ++c) row[size_t(t)] += std::abs(at(c, u, t)) / double(C);
      }
      mean.push_back(row);
      fmt::print("kernel {} mean |w| row {}: {:.4f}\n", p.name, u, fmt::join(row, " "));
    }
    for (int64_t c = 0; c < std::min<int64_t>(C, 8); ++c) {
      nlohmann::json m = nlohmann::json::array();
      for (int64_t u = 0; u < k; ++u) {
        std::vector<double> row(static_cast<size_t>(k));
        for (int64_t t = 0; t < k; ++t) row[size_t(t)] = at(c, u, t);
        m.push_back(row);
      }
      channels.push_back(m);
    }
    j.push_back({{"param", p.name}, {"shape", v.shape()}, {"mean_abs", mean}, {"channels", channels}});
  }
  return j;
}

// The bias over two relation coordinates (ast: up x down), when the encoding has one.
nlohmann::json bias_grid(const train::LoadedRun& run) {
  const auto g = train::learned_bias_grid(*run.model);
  if (!g) return nullptr;
  fmt::print("bias grid: {} x {} per head over ({}, {})\n", g->heads[0].size(), g->heads[0][0].size(), g->row_axis,
             g->col_axis);
  return {{"row_axis", g->row_axis}, {"col_axis", g->col_axis}, {"note", g->note}, {"heads", g->heads}};
}

constexpr const char* kDefaultText = "ROMEO:\nWhat light through yonder window breaks?";

// Without --text: the first 32 tokens of a validation window (with their position channels) for
// a run whose vocabulary cannot spell kDefaultText or whose encoding reads a channel.
nlohmann::json attention_of_data(const train::LoadedRun& run) {
  const train::Batch b = run.data->val_batch(0, std::min<int64_t>(run.cfg.data.seq_len, 32));
  const Tensor tokens = b.input.narrow(0, 0, 1).contiguous();
  const Tensor positions = b.positions.defined() ? b.positions.narrow(0, 0, 1).contiguous() : Tensor();
  const auto maps = train::attention_maps(*run.model, tokens, positions);
  const std::vector<int64_t> ids = tokens.to_vector<int64_t>();
  nlohmann::json j = {{"text", run.data->decode(ids)}, {"tokens", ids.size()}, {"layers", nlohmann::json::array()}};
  for (const auto& m : maps) {
    const int64_t H = m.size(0), L = m.size(1);
    const auto v = m.to_vector<double>();
    nlohmann::json hs = nlohmann::json::array();
    for (int64_t h = 0; h < H; ++h) {
      nlohmann::json rows = nlohmann::json::array();
      for (int64_t i = 0; i < L; ++i)
        rows.push_back(std::vector<double>(v.begin() + (h * L + i) * L, v.begin() + (h * L + i + 1) * L));
      hs.push_back(rows);
    }
    j["layers"].push_back(hs);
  }
  fmt::print("attention maps: {} layers x {} heads for the first {} tokens of a validation window\n", maps.size(),
             run.cfg.model.n_heads, ids.size());
  return j;
}

// The attention maps [H, L, L] of every layer for the text (a text decoder).
// given: --text, absent (nullopt) for the default.
nlohmann::json attention(const train::LoadedRun& run, const std::optional<std::string>& given) {
  if (!given) {
    // An encoding that reads position channels (ast, a channel distance) has none for a typed text.
    bool spelled = run.cfg.model.position_distance == "index" && run.cfg.data.position_channels.empty();
    try {
      if (spelled) run.data->encode(kDefaultText);
    } catch (const Error&) {
      spelled = false;
    }
    if (!spelled) return attention_of_data(run);
  }
  const std::string text = given ? *given : std::string(kDefaultText);
  const std::vector<int64_t> ids = run.data->encode(text);
  const Tensor positions;  // a typed text has no position channels
  const std::string& shown = text;
  if (ids.empty() || int64_t(ids.size()) > train::kMaxInspectTokens)
    throw UsageError(
        fmt::format("inspect --text: {} tokens; expected 1 to {} (the attention maps are L x L per head "
                    "and layer)",
                    ids.size(), train::kMaxInspectTokens));
  const auto maps =
      train::attention_maps(*run.model, Tensor::from_vector(ids, {1, int64_t(ids.size())}), positions);
  nlohmann::json j = {{"text", shown}, {"tokens", ids.size()}, {"layers", nlohmann::json::array()}};
  for (const auto& m : maps) {
    const int64_t H = m.size(0), L = m.size(1);
    const auto v = m.to_vector<double>();  // final [H, L, L] result, copied once for the report
    nlohmann::json hs = nlohmann::json::array();
    for (int64_t h = 0; h < H; ++h) {
      nlohmann::json rows = nlohmann::json::array();
      for (int64_t i = 0; i < L; ++i)
        rows.push_back(std::vector<double>(v.begin() + (h * L + i) * L, v.begin() + (h * L + i + 1) * L));
      hs.push_back(rows);
    }
    j["layers"].push_back(hs);
  }
  fmt::print("attention maps: {} layers x {} heads for {} tokens\n", maps.size(), run.cfg.model.n_heads, ids.size());
  return j;
}

// The DOT graph of attention layer 0; encodings that look their bias up by an index
// (graph_spd) take it from a data batch.
std::string layer_graph(const train::LoadedRun& run) {
  Tensor index, positions;
  int64_t L = 6;
  Generator g(run.cfg.train.seed + 2);
  train::Batch b = run.data->train_batch(g);
  if (b.position_index.defined()) {
    index = b.position_index.dim() == 3 ? b.position_index.select(0, 0).contiguous() : b.position_index;
    L = index.size(-1);
  }
  if (b.positions.defined()) positions = b.positions.narrow(0, 0, 1).narrow(1, 0, L).contiguous();  // ast: a tree
  return train::attention_graph_dot(*run.model, L, 0, index, positions);
}

int run(const Args& a) {
  const train::LoadedRun run = train::load_run(a.dir);
  const std::string out = a.out.empty() ? a.dir + "/inspect" : a.out;
  std::filesystem::create_directories(out);
  DirLock lock(out, "inspect output folder");  // one inspect at a time writes there
  nlohmann::json j = {
      {"run", a.dir}, {"checkpoint", run.checkpoint}, {"step", run.step}, {"position", run.cfg.model.position}};
  fmt::print("{} (step {}), position encoding {}\n", run.checkpoint, run.step, run.cfg.model.position);
  j["distance"] = run.cfg.model.position_distance;  // "index", or the channel kj - qi comes from
  if (run.cfg.model.position_distance != "index")
    fmt::print("distances kj - qi: from channel '{}' (model.position.distance)\n", run.cfg.model.position_distance);
  const nlohmann::json bias = bias_curves(run, a.distances);
  j["bias"] = bias["bias"];
  if (!bias["note"].get<std::string>().empty()) j["bias_note"] = bias["note"];
  j["position_grad_rows"] = grad_rows(run);
  if (nlohmann::json kj = conv_kernels(run); !kj.empty()) j["conv_kernels"] = kj;
  if (nlohmann::json grid = bias_grid(run); !grid.is_null()) j["bias_grid"] = grid;
  if (train::text_decoder(run.cfg))
    j["attention"] =
        attention(run, a.text_opt && a.text_opt->count() > 0 ? std::optional<std::string>(a.text) : std::nullopt);
  replace_file_atomically(out + "/attention_layer0.dot", layer_graph(run));
  replace_file_atomically(out + "/inspect.json", j.dump() + "\n");  // checked: a full disk is an error
  fmt::print("wrote {}/inspect.json and {}/attention_layer0.dot (dot -Tpng)\n", out, out);
  return 0;
}

Action setup(CLI::App& cmd) {
  auto a = std::make_shared<Args>();
  cmd.add_option("run_dir", a->dir, "run directory or checkpoint directory")->required();
  cmd.add_option("--out", a->out, "output directory (default RUN_DIR/inspect)");
  a->text_opt =
      cmd.add_option("--text", a->text,
                     "input for the attention maps (text runs; default: a line of Romeo and Juliet, or the first 32 "
                     "tokens of a validation window where the vocabulary cannot spell it or the encoding reads a "
                     "position channel)");
  cmd.add_option("--distances", a->distances, "bias curve over distances 0 .. -(N-1)")
      ->check(CLI::Range(int64_t(1), train::kMaxInspectDistances))
      ->capture_default_str();
  return [a](Context&) { return run(*a); };
}

}  // namespace

Command inspect_command() {
  return {"inspect", "what a trained model's position encoding learned", setup};
}

}  // namespace relpos::cli
