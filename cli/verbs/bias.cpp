// relpos bias --type NAME [--heads H] [--lq N] [--lk M] [--q-offset A] [--k-offset B]
//             [--causal|--bidirectional] [--param k=v ...] [--table init|identity] [--json]
//             [--times t0,t1,...]   (the bias against time distances t[j] - t[i])
// The additive bias [H][Lq][Lk] a fresh encoding adds (and its lookup index, for table
// encodings).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "experiments/inspect.h"
#include "trainers/limits.h"

namespace relpos::cli {
namespace {

struct Args {
  inspect::BiasRequest req;
  std::string type;  // resolved into req.type in run(), where an unknown name is a config error
  std::vector<std::string> params;
  bool json = false, causal = false, bidirectional = false;
  std::string table = "init";
};

void print_json(const inspect::BiasRequest& req, const inspect::BiasReport& r) {
  // masked (future) cells of a causal bias are null
  auto masked = [&](int64_t i, int64_t j) { return req.causal && req.k_offset + j > req.q_offset + i; };
  nlohmann::json j = {{"type", req.type},     {"heads", req.heads},       {"lq", req.lq},
                      {"lk", req.lk},         {"q_offset", req.q_offset}, {"k_offset", req.k_offset},
                      {"causal", req.causal}, {"params", req.params}};
  if (!r.bias.empty()) {
    auto& b = j["bias"] = nlohmann::json::array();
    for (int64_t h = 0; h < req.heads; ++h) {
      nlohmann::json rows = nlohmann::json::array();
      for (int64_t i = 0; i < req.lq; ++i) {
        nlohmann::json row = nlohmann::json::array();
        for (int64_t k = 0; k < req.lk; ++k)
          row.push_back(masked(i, k) ? nlohmann::json(nullptr)
                                     : nlohmann::json(r.bias[size_t((h * req.lq + i) * req.lk + k)]));
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
}

void print_text(const inspect::BiasRequest& req, const inspect::BiasReport& r) {
  // With --causal, future keys are masked: their bias never reaches the softmax.
  auto masked = [&](int64_t i, int64_t j) { return req.causal && req.k_offset + j > req.q_offset + i; };
  fmt::print("{} bias, {} heads, Lq {} (offset {}), Lk {} (offset {}), {}\n", req.type, req.heads, req.lq, req.q_offset,
             req.lk, req.k_offset, req.causal ? "causal" : "bidirectional");
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
}

int run(Args a) {
  a.req.type = a.type;
  a.req.causal = a.causal;
  a.req.identity_table = a.table == "identity";
  a.req.params = parse_params(a.params);
  if (!a.req.times.empty()) {
    if (int64_t(a.req.times.size()) > train::kMaxBiasLen)
      throw UsageError(fmt::format("bias --times: {} times, at most {}", a.req.times.size(), train::kMaxBiasLen));
    a.req.lq = a.req.lk = int64_t(a.req.times.size());
    a.req.q_offset = a.req.k_offset = 0;
  }
  // H * Lq * Lk values are printed: bounded (each factor is capped, so no overflow here).
  const int64_t cells = a.req.heads * a.req.lq * a.req.lk;
  if (cells > train::kMaxBiasCells)
    throw UsageError(fmt::format("bias: --heads {} x --lq {} x --lk {} = {} values, more than the {} it prints",
                                 a.req.heads, a.req.lq, a.req.lk, cells, train::kMaxBiasCells));
  const inspect::BiasReport r = inspect::position_bias(a.req);
  a.json ? print_json(a.req, r) : print_text(a.req, r);
  return 0;
}

Action setup(CLI::App& cmd) {
  auto a = std::make_shared<Args>();
  inspect::BiasRequest& req = a->req;
  using train::kMaxBiasHeads, train::kMaxBiasLen, train::kMaxOffset;
  cmd.add_option("--type", a->type, "position encoding (relpos list)")->required();
  cmd.add_option("--heads", req.heads, "number of heads")
      ->check(CLI::Range(int64_t(1), kMaxBiasHeads))
      ->capture_default_str();
  cmd.add_option("--lq", req.lq, "query length")->check(CLI::Range(int64_t(1), kMaxBiasLen))->capture_default_str();
  cmd.add_option("--lk", req.lk, "key length")->check(CLI::Range(int64_t(1), kMaxBiasLen))->capture_default_str();
  cmd.add_option("--q-offset", req.q_offset, "absolute position of query 0")->check(CLI::Range(int64_t(0), kMaxOffset));
  cmd.add_option("--k-offset", req.k_offset, "absolute position of key 0")->check(CLI::Range(int64_t(0), kMaxOffset));
  auto* causal = cmd.add_flag("--causal", a->causal, "decoder (causal) form");
  cmd.add_flag("--bidirectional", a->bidirectional, "encoder (bidirectional) form (default)")->excludes(causal);
  cmd.add_option("--param", a->params, "encoding parameter key=value (repeatable)");
  cmd.add_option("--table", a->table, "init: freshly initialised tables; identity: row r holds r (shows buckets)")
      ->check(CLI::IsMember({"init", "identity"}));
  cmd.add_option("--seed", req.seed, "initialisation seed");
  cmd.add_option("--times", req.times,
                 "onsets t0,t1,... of Lq = Lk tokens: the bias against time distances t[j] - t[i] "
                 "(model.position.distance: time; distance-indexed encodings)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t(0), int64_t(1) << 30));
  cmd.add_flag("--json", a->json, "print JSON");
  return [a](Context&) { return run(*a); };
}

}  // namespace

Command bias_command() {
  return {"bias", "print the additive bias [H][Lq][Lk] (and lookup index) of an encoding", setup};
}

}  // namespace relpos::cli
