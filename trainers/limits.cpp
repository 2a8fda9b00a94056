// trainers/limits.cpp — see limits.h.
#include "trainers/limits.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "trainers/io/available_memory.h"
#include "trainers/data/data_tasks.h"
#include "core/shape.h"
#include "nn/attention.h"
#include "nn/positional/registry.h"

namespace relpos::train {

int64_t checked_size(std::initializer_list<std::pair<int64_t, const char*>> factors, const std::string& what) {
  int64_t acc = 1;
  bool ok = true;
  for (const auto& [v, k] : factors) ok = ok && checked_mul(acc, v, acc);
  if (ok) return acc;
  std::string desc;
  for (const auto& [v, k] : factors) desc += fmt::format("{}{} = {}", desc.empty() ? "" : " x ", k, v);
  fail_config("{}: the size {} overflows a 64-bit integer; reduce these values", what, desc);
}

namespace {

std::string human(int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = double(b);
  int u = 0;
  while (v >= 1024 && u < 6) v /= 1024, ++u;
  return fmt::format("{:.1f} {}", v, units[u]);
}

// What the estimate needs from the position encoding: its learnable parameters (counted
// without building tables at the config's sizes: nn::position_parameter_count) and the buckets
// of its bucketed content terms (Shaw: 2 k_max + 1; 0 = none), read from nn::make_position_probe.
struct PositionSizes {
  int64_t parameters = 0, buckets = 0;
};

PositionSizes position_sizes(const nn::ModelConfig& m, int64_t stacks) {
  nn::PositionConfig pc = nn::position_config(m);
  const bool share = nn::position_table_shared(m);
  pc.shared_across_layers = share;
  PositionSizes f;
  const std::optional<int64_t> n = nn::position_parameter_count(pc);
  if (!n)
    fail_config(
        "model.position: the parameter count of '{}' at model.d_model {}, model.n_heads {}, model.max_len {} "
        "overflows a 64-bit integer; reduce these values",
        m.position, m.d_model, m.n_heads, m.max_len);
  f.parameters = *n;
  Generator g(0);
  nn::PositionEncodingPtr pos = nn::make_position_probe(pc, g);
  if (!share && !pos->is_absolute())
    f.parameters = checked_size({{f.parameters, "position table size"}, {m.n_layers, "model.n_layers"},
                                 {stacks, "stacks"}}, "model.position");
  const nn::PositionEncoding::Buckets bt = pos->bucketed_terms(nn::AttnGeometry{1, 1, 0, 0, true, Tensor()});
  f.buckets = bt.keys.defined() ? bt.keys.size(0) : 0;
  return f;
}

// Attention memory. The fused kernel (model.attention fused, an encoding that declares
// fused_attention, no softcap, on the CPU; dropout runs inside it) keeps the output and the
// row logsumexp per layer, and per thread a tile of 64 x 256 scores (twice in backward): O(L).
// Otherwise scores, probabilities and score terms per layer (B H L^2 each) are kept for
// backward, plus one layer's transient workspace.
MemoryTerm attention_term(const Config& cfg, int64_t L, int64_t layers, int64_t buckets) {
  const nn::ModelConfig& m = cfg.model;
  const int64_t B = cfg.data.batch_size, H = m.n_heads;
  const bool fused =
      nn::fused_attention_possible(m.attention == nn::AttentionImpl::Fused, m.stability.softcap, cfg.train.device) &&
      m.position->fused_attention &&
      // distances from a channel: a bias stays fused (an index bias), content terms (Shaw) do not
      (m.position_distance == "index" || buckets == 0);
  // distances from a channel (model.position.distance): the per-example index [B, L, L] int64
  const int64_t channel_index =
      m.position_distance == "index"
          ? 0
          : checked_size({{B, "data.batch_size"}, {L, "data.seq_len"}, {L, "data.seq_len"}, {8, "bytes"}},
                         "channel distances [B, L, L]");
  if (fused) {
    const int64_t threads =  // train.threads 0 = every core
        cfg.train.threads > 0 ? cfg.train.threads : std::max<int64_t>(std::thread::hardware_concurrency(), 1);
    // per layer: the row logsumexp, and with bucketed terms q R_k^T, P per bucket and their
    // concatenation with the output (3 x [B, H, L, NB])
    const int64_t per_row = 1 + 3 * buckets;
    return {
        "attention (fused)",
        checked_size({{B, "data.batch_size"},
                      {H, "model.n_heads"},
                      {L, "data.seq_len"},
                      {layers, "model.n_layers"},
                      {per_row, "1 + 3 buckets"},
                      {4, "bytes"}},
                     "attention [B, H, L] x model.n_layers") +
            checked_size({{threads, "train.threads"}, {64 * 256 * 3, "tile"}, {8, "bytes"}}, "attention workspace") +
            channel_index,
        "data.batch_size, model.n_heads, data.seq_len, model.n_layers (model.attention: fused)"};
  }
  const int64_t scores = checked_size(
      {{B, "data.batch_size"}, {H, "model.n_heads"}, {L, "data.seq_len"}, {L, "data.seq_len"}, {4, "bytes"}},
      "attention scores [B, H, L, L]");
  return {"attention",
          checked_size({{scores, "B*H*L*L*4"}, {layers, "model.n_layers"}, {4, "copies"}},
                       "attention scores x model.n_layers") +
              checked_size({{scores, "B*H*L*L*4"}, {2, "copies"}}, "attention") + channel_index,
          "data.batch_size, model.n_heads, data.seq_len (squared), model.n_layers"};
}

}  // namespace

std::string ResourceEstimate::str() const {
  std::string parts;
  for (const auto& t : terms) parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", t.what, human(t.bytes));
  return fmt::format("{} ({})", human(total_bytes), parts);
}

ResourceEstimate estimate_resources(const Config& cfg, int64_t vocab, int64_t seq_len) {
  const nn::ModelConfig& m = cfg.model;
  const DataConfig& d = cfg.data;
  const int64_t V = std::max<int64_t>(vocab > 0 ? vocab : m.vocab, 2);
  const int64_t n = seq_len > 0 ? seq_len : d.seq_len;
  const DataTask& task = find_data_task(d.task);
  // Longest sequence a layer sees (task_positions; n <= kMaxLen, no overflow), + 2 of slack.
  const int64_t L = task_positions(cfg, n) + 2;
  const int64_t B = d.batch_size, D = m.d_model, F = m.d_ff;
  const int64_t stacks = m.kind == nn::ModelKind::EncoderDecoder ? 2 : 1;
  const int64_t layers = checked_size({{m.n_layers, "model.n_layers"}, {stacks, "stacks"}}, "model.n_layers");
  const std::string model_keys = "model.d_model, model.d_ff, model.n_layers";

  ResourceEstimate e;
  // Parameters: embeddings + output head, per layer attention (4 D^2, + cross attention in the
  // decoder of an encoder-decoder), MLP (2 D F), norms and biases; position tables.
  const int64_t per_layer = checked_size({{D, "model.d_model"}, {D, "model.d_model"}, {4, "4"}}, "model.d_model") +
                            checked_size({{D, "model.d_model"}, {F, "model.d_ff"}, {2, "2"}}, "model.d_ff") +
                            checked_size({{D, "model.d_model"}, {16, "16"}}, "model.d_model") + F;
  int64_t params = checked_size({{per_layer, "per-layer parameters"}, {layers, "model.n_layers"}}, "model");
  if (m.kind == nn::ModelKind::EncoderDecoder)
    params += checked_size({{D, "model.d_model"}, {D, "model.d_model"}, {4, "4"}, {m.n_layers, "model.n_layers"}},
                           "model");
  params += checked_size({{V, "vocabulary"}, {D, "model.d_model"}, {2, "2"}}, "vocabulary x model.d_model");
  const PositionSizes pos = position_sizes(m, stacks);
  params += pos.parameters;
  e.parameters = params;
  const int64_t opt_copies = cfg.optim.name == nn::optim::OptimizerKind::SGD ? 1 : 2;  // momentum / Adam m and v
  e.terms.push_back({"parameters + gradients", checked_size({{params, "parameters"}, {8, "bytes"}}, "model"),
                     model_keys + ", model.position.*, vocabulary (data.vocab_size or the text's characters)"});
  e.terms.push_back({"optimizer state",
                     checked_size({{params, "parameters"}, {4 * opt_copies, "bytes"}}, "optim.name"),
                     model_keys + ", optim.name"});
  // Activations kept for backward, per layer ~ B L (12 D + 3 F) floats.
  const int64_t width = checked_size({{D, "model.d_model"}, {12, "12"}}, "model.d_model") +
                        checked_size({{F, "model.d_ff"}, {3, "3"}}, "model.d_ff");
  e.terms.push_back({"activations",
                     checked_size({{B, "data.batch_size"}, {L, "data.seq_len"}, {width, "model.d_model/d_ff"},
                                   {layers, "model.n_layers"}, {4, "bytes"}},
                                  "activations"),
                     "data.batch_size, data.seq_len, model.d_model, model.d_ff, model.n_layers"});
  e.terms.push_back(attention_term(cfg, L, layers, pos.buckets));
  if (m.mem_len > 0) {  // Transformer-XL: per layer the memory [B, mem_len, D] and the scores over it
    const int64_t M = m.mem_len;
    e.terms.push_back(
        {"segment memory",
         checked_size({{B, "data.batch_size"}, {M, "model.mem_len"}, {D, "model.d_model"}, {layers, "model.n_layers"},
                       {8, "bytes"}}, "segment memory [B, model.mem_len, D]") +
             checked_size({{B, "data.batch_size"}, {m.n_heads, "model.n_heads"}, {L, "data.seq_len"},
                           {M, "model.mem_len"}, {layers, "model.n_layers"}, {16, "bytes"}},
                          "attention over the memory [B, H, L, model.mem_len]"),
         "model.mem_len, data.batch_size, model.n_heads, data.seq_len, model.d_model, model.n_layers"});
  }
  if (task.position_index)  // graph inputs: B L^2 int64 indices
    e.terms.push_back({"position index", checked_size({{B, "data.batch_size"}, {L, "data.seq_len"},
                                                        {L, "data.seq_len"}, {8, "bytes"}}, "data.task " + d.task),
                       "data.batch_size, data.seq_len (squared)"});
  if (const int64_t P = int64_t(d.position_channels.size()); P > 0)  // per-token position channels: B L P int64
    e.terms.push_back({"position channels", checked_size({{B, "data.batch_size"}, {L, "data.seq_len"},
                                                           {P, "data.position_channels"}, {8, "bytes"}},
                                                          "positions [B, L, P]"),
                       "data.batch_size, data.seq_len, data.position_channels"});
  // Logits and their gradient (B L V, three copies through cross-entropy).
  e.terms.push_back({"logits", checked_size({{B, "data.batch_size"}, {L, "data.seq_len"}, {V, "vocabulary"},
                                             {12, "bytes"}}, "logits [B, L, V]"),
                     "data.batch_size, data.seq_len, vocabulary (data.vocab_size or the text's characters)"});
  int64_t total = 0;
  for (const auto& t : e.terms)
    if (!checked_add(total, t.bytes, total)) fail_config("the memory estimate overflows a 64-bit integer");
  e.total_bytes = total;
  return e;
}

void check_device_usable(Device device) {
  if (device != Device::CUDA) return;
  RELPOS_CHECK_CONFIG(cuda::built_with_cuda(), "train.device is 'cuda' but this relpos was built without CUDA support "
                                               "(rebuild with nvcc and -DRELPOS_CUDA=ON), or set train.device: cpu");
  RELPOS_CHECK_CONFIG(cuda::available(),
                      "train.device is 'cuda' but no CUDA device is available on this machine ({}) (relpos info lists "
                      "devices); set train.device: cpu",
                      cuda::unavailable_reason());
}

void check_memory(const ResourceEstimate& e, bool ignore, const std::string& context) {
  const AvailableMemory avail = available_memory();
  if (ignore || avail.bytes == 0 || e.total_bytes <= avail.bytes) return;
  std::vector<MemoryTerm> t = e.terms;
  std::sort(t.begin(), t.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  fail_config("{}: the config needs an estimated {} of memory but {} is available ({}); the largest part "
              "is {} ({}), driven by {}; reduce those values or pass --ignore-memory-check",
              context, human(e.total_bytes), human(avail.bytes), avail.source, t[0].what, human(t[0].bytes), t[0].keys);
}

}  // namespace relpos::train
