// trainers/evaluate.cpp — per-position evaluation (see evaluate.h). The per-token losses are
// computed with tensor ops and reduced over the batch on the tensor side; the host only reads
// the final [L] vectors (per-position sums) once per batch, and builds the int64 window
// inputs/targets from the token stream.
#include "trainers/evaluate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "autograd/grad_mode.h"
#include "kernels/ops.h"
#include "trainers/data/data_tasks.h"
#include "trainers/data/segments.h"

namespace relpos::train {

void PositionAccumulator::add(const Tensor& logits, const Tensor& target) {
  RELPOS_CHECK(logits.dim() == 3 && target.dim() == 2 && logits.size(0) == target.size(0) &&
                   logits.size(1) == target.size(1),
               "PositionAccumulator: expected logits [B, L, V] and target [B, L], got {} and {}",
               shape_str(logits.shape()), shape_str(target.shape()));
  const int64_t B = logits.size(0), L = logits.size(1), V = logits.size(2);
  Tensor flat = logits.reshape({B * L, V});
  Tensor tg = target.reshape({B * L});
  // per-token loss [B*L] (0 where ignored) -> [B, L] -> sum over the batch [L]
  Tensor tok = k::cross_entropy(flat, tg, kIgnore, k::Reduction::None).loss;
  Tensor pos_loss = k::sum(tok.reshape({B, L}), {0});
  // scored mask [B, L]: target != ignore; argmax hit: logit of the target >= the row max
  Tensor tgf = tg.to(flat.dtype());
  Tensor valid = k::binary(k::Binary::Ne, tgf, Tensor::full({1}, double(kIgnore), flat.dtype()));
  Tensor safe = k::where(valid, tg, Tensor::zeros({1}, DType::I64));  // ignore -> class 0
  Tensor tlogit = k::gather(flat, 1, safe.reshape({B * L, 1})).reshape({B * L});
  Tensor rowmax = k::reduce(k::Reduce::Max, flat, {1}, false);
  Tensor hit = k::mul(k::binary(k::Binary::Ge, tlogit, rowmax), valid);
  Tensor pos_hit = k::sum(hit.reshape({B, L}), {0});
  Tensor pos_count = k::sum(valid.reshape({B, L}), {0});
  if (int64_t(loss_sum.size()) < L) {
    loss_sum.resize(size_t(L), 0.0);
    count.resize(size_t(L), 0);
    correct.resize(size_t(L), 0.0);
  }
  // Host loop over the final per-position results ([L] values), once per batch.
  auto ls = pos_loss.to_vector<double>(), hs = pos_hit.to_vector<double>(), cs = pos_count.to_vector<double>();
  for (int64_t t = 0; t < L; ++t) {
    loss_sum[size_t(t)] += ls[size_t(t)];
    correct[size_t(t)] += hs[size_t(t)];
    count[size_t(t)] += int64_t(std::llround(cs[size_t(t)]));
  }
}

std::vector<EvalWindow> plan_windows(int64_t n_tokens, int64_t L, int64_t stride, int64_t max_scored) {
  RELPOS_CHECK(L >= 1 && stride >= 1 && stride <= L, "plan_windows: need 1 <= stride ({}) <= L ({})", stride, L);
  RELPOS_CHECK(n_tokens >= L + 1, "evaluation: the validation stream has {} tokens, too few for windows of {}",
               n_tokens, L);
  std::vector<EvalWindow> out;
  int64_t scored = 0;
  // A window needs L inputs and L targets: start + L <= n_tokens - 1.
  for (int64_t start = 0; start + L <= n_tokens - 1; start += stride) {
    EvalWindow w{start, start == 0 ? 0 : L - stride};
    out.push_back(w);
    scored += L - w.score_from;
    if (max_scored > 0 && scored >= max_scored) break;
  }
  return out;
}

PositionEval summarize(const PositionAccumulator& acc, int64_t bucket, int64_t train_len) {
  RELPOS_CHECK(bucket >= 1, "evaluation: the position bucket width must be >= 1, got {}", bucket);
  PositionEval r;
  r.train_len = train_len;
  const int64_t L = int64_t(acc.loss_sum.size());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  double total = 0, hits = 0, beyond = 0;
  r.position_loss.assign(size_t(L), nan);
  for (int64_t lo = 0; lo < L; lo += bucket) r.buckets.push_back({lo, std::min(lo + bucket, L), 0.0, 0});
  // Host loop over the [L] per-position sums (final results, not model tensors).
  for (int64_t t = 0; t < L; ++t) {
    const double s = acc.loss_sum[size_t(t)];
    const int64_t n = acc.count[size_t(t)];
    if (n > 0) r.position_loss[size_t(t)] = s / double(n);
    total += s;
    hits += acc.correct[size_t(t)];
    r.tokens += n;
    BucketLoss& b = r.buckets[size_t(t / bucket)];
    b.loss += s;
    b.tokens += n;
    if (t >= train_len) beyond += s, r.beyond_tokens += n;
  }
  for (auto& b : r.buckets) b.loss = b.tokens > 0 ? b.loss / double(b.tokens) : nan;
  RELPOS_CHECK(r.tokens > 0, "evaluation found no target tokens");
  r.loss = total / double(r.tokens);
  r.perplexity = std::exp(r.loss);
  r.accuracy = hits / double(r.tokens);
  if (r.beyond_tokens > 0) r.beyond_loss = beyond / double(r.beyond_tokens);
  return r;
}

Tensor subset_targets(const Tensor& target, const Tensor& positions, int64_t column, int64_t min_value) {
  RELPOS_CHECK(target.dim() == 2 && positions.defined() && positions.dim() == 3 &&
                   positions.size(0) == target.size(0) && positions.size(1) == target.size(1) &&
                   column >= 0 && column < positions.size(2),
               "evaluation subset: expected targets [B, L] and position channels [B, L, > {}], got {} and {}", column,
               shape_str(target.shape()), positions.defined() ? shape_str(positions.shape()) : std::string("none"));
  const int64_t B = target.size(0), L = target.size(1), P = positions.size(2);
  // Host loop over the batch's int64 targets and channels (data-pipeline input).
  std::vector<int64_t> t = target.to_vector<int64_t>();
  const std::vector<int64_t> p = positions.to_vector<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) {
      int64_t& y = t[size_t(b * L + i)];
      if (y == kIgnore) continue;
      const int64_t v = i + 1 < L ? p[size_t((b * L + i + 1) * P + column)] : -1;
      if (!(v >= min_value && v <= i + 1)) y = kIgnore;
    }
  return Tensor::from_vector(t, {B, L});
}

namespace {

// The column of EvalOptions::subset_channel in the batches' positions; -1 without a subset.
int64_t subset_column(const Config& cfg, const EvalOptions& opt) {
  if (opt.subset_channel.empty()) return -1;
  const auto& chs = cfg.data.position_channels;
  const auto it = std::find(chs.begin(), chs.end(), opt.subset_channel);
  RELPOS_CHECK_CONFIG(opt.mode == "random" && it != chs.end(),
                      "eval subset channel '{}': needs --mode random and a channel data.position_channels lists "
                      "(this run: --mode {}, channels: {})",
                      opt.subset_channel, opt.mode,
                      chs.empty() ? std::string("none") : fmt::format("{}", fmt::join(chs, ", ")));
  return int64_t(it - chs.begin());
}

// The subset's description, size and mean loss from its per-position sums.
void add_subset(PositionEval& r, const PositionAccumulator& sub, const EvalOptions& opt) {
  r.subset = fmt::format("targets whose '{}' channel is >= {} and reaches no further back than the window's start "
                         "(a parent at least {} tokens back, inside the window)",
                         opt.subset_channel, opt.subset_min, opt.subset_min);
  double s = 0;
  for (size_t t = 0; t < sub.count.size(); ++t) s += sub.loss_sum[t], r.subset_tokens += sub.count[t];
  if (r.subset_tokens > 0) r.subset_loss = s / double(r.subset_tokens);
}

Tensor logits_of(const nn::Model& model, const Batch& b) {
  return model.logits(b.model_input()).data();
}

}  // namespace

namespace {

// --mode windows | sliding: consecutive windows of the validation stream (plan_windows), each
// scoring its targets from score_from on. Returns the number of windows; sets `stride`.
int64_t stream_windows(const nn::Model& model, const Dataset& data, const Config& cfg, const EvalOptions& opt,
                       int64_t L, PositionAccumulator& acc, int64_t& stride) {
  const int64_t train_len = cfg.data.seq_len;
  RELPOS_CHECK_CONFIG(opt.mode == "windows" || opt.mode == "sliding",
                      "eval --mode '{}': expected random, windows, sliding or segments", opt.mode);
  RELPOS_CHECK_CONFIG(text_decoder(cfg),
                      "eval --mode {}: consecutive windows need a decoder on a text task (this run: {} on '{}'); "
                      "use --mode random",
                      opt.mode, cfg.model.kind, cfg.data.task);
  stride = opt.mode == "windows" ? L : (opt.stride > 0 ? opt.stride : std::max<int64_t>(L / 2, 1));
  RELPOS_CHECK_CONFIG(stride <= L, "eval --stride {} must not exceed --seq-len {}", stride, L);
  const int64_t budget =
      opt.max_tokens > 0 ? opt.max_tokens : cfg.train.eval_batches * cfg.data.batch_size * train_len;
  const std::vector<int64_t> ids = data.val_stream();
  const std::vector<EvalWindow> plan = plan_windows(int64_t(ids.size()), L, stride, budget);
  const int64_t B = cfg.data.batch_size;
  for (size_t w0 = 0; w0 < plan.size(); w0 += size_t(B)) {
    const int64_t nb = std::min<int64_t>(B, int64_t(plan.size() - w0));
    std::vector<int64_t> x(size_t(nb * L)), y(size_t(nb * L));
    for (int64_t b = 0; b < nb; ++b) {  // host loop building int64 inputs from the token stream
      const EvalWindow& w = plan[w0 + size_t(b)];
      for (int64_t t = 0; t < L; ++t) {
        x[size_t(b * L + t)] = ids[size_t(w.start + t)];
        y[size_t(b * L + t)] = t >= w.score_from ? ids[size_t(w.start + t + 1)] : kIgnore;
      }
    }
    Tensor input = Tensor::from_vector(x, {nb, L}), target = Tensor::from_vector(y, {nb, L});
    acc.add(model.forward(input).data(), target);
  }
  return int64_t(plan.size());
}

}  // namespace

PositionEval evaluate_positions(const nn::Model& model, const Dataset& data, const Config& cfg,
                                const EvalOptions& opt) {
  NoGradGuard ng;
  const int64_t train_len = cfg.data.seq_len;
  const int64_t L = opt.seq_len > 0 ? opt.seq_len : train_len;
  PositionAccumulator acc, sub;
  PositionEval r;
  int64_t stride = 0, windows = 0;
  const int64_t column = subset_column(cfg, opt);
  if (opt.mode == "random") {
    for (int64_t i = 0; i < cfg.train.eval_batches; ++i) {
      Batch b = data.val_batch(i, L);
      Tensor lg = logits_of(model, b);
      acc.add(lg, b.target);
      if (column >= 0) sub.add(lg, subset_targets(b.target, b.positions, column, opt.subset_min));
    }
    windows = cfg.train.eval_batches * cfg.data.batch_size;
  } else if (opt.mode == "examples") {
    const int64_t n = data.val_examples(), B = cfg.data.batch_size;
    RELPOS_CHECK_CONFIG(n > 0, "eval --mode examples: every validation example once needs a dataset of labelled "
                        "examples (data.task token_labels; this run: '{}'); use --mode random",
                        cfg.data.task);
    for (int64_t first = 0; first < n; first += B) {
      Batch b = data.val_examples_batch(first, std::min(B, n - first), L);
      acc.add(logits_of(model, b), b.target);
    }
    windows = n;
  } else if (cfg.model.position_distance != "index" &&
             (opt.mode == "windows" || opt.mode == "sliding" || opt.mode == "segments")) {
    fail_config(
        "eval --mode {}: the windows are cut from the validation token stream, which carries no position "
        "channels, and this run's encoding reads its distances from channel '{}' "
        "(model.position.distance); use --mode random (windows of the validation file with their channels)",
        opt.mode, cfg.model.position_distance);
  } else if (opt.mode == "segments") {
    RELPOS_CHECK_CONFIG(text_decoder(cfg),
                        "eval --mode segments: Transformer-XL memory needs a decoder on a text task");
    const int64_t budget =
        opt.max_tokens > 0 ? opt.max_tokens : cfg.train.eval_batches * cfg.data.batch_size * train_len;
    SegmentStream seg(data.val_stream(), cfg.data.batch_size, L, /*contiguous_rows=*/true);
    nn::SegmentMemory mem(opt.mem_len >= 0 ? opt.mem_len : cfg.model.mem_len);
    Generator unused(0);
    int64_t scored = 0;
    while (scored < budget && seg.batches_left() > 0) {
      Batch b = seg.next(unused, nullptr);
      acc.add(model.forward_with_memory(b.input, mem).data(), b.target);
      scored += b.target.numel();
      ++windows;
    }
    stride = mem.mem_len;  // reported as the memory length
  } else {
    windows = stream_windows(model, data, cfg, opt, L, acc, stride);
  }
  r = summarize(acc, opt.bucket > 0 ? opt.bucket : train_len, train_len);
  if (column >= 0) add_subset(r, sub, opt);
  r.mode = opt.mode;
  r.seq_len = L;
  r.stride = stride;
  r.windows = windows;
  return r;
}

std::unique_ptr<nn::Model> with_position_settings(const nn::Model& model, Config& cfg,
                                                  const std::map<std::string, std::string>& settings) {
  for (const auto& [k, v] : settings) cfg.model.position_params.set(k, v);
  auto m = std::make_unique<nn::Model>(cfg.model, cfg.train.seed);
  m->load_state_dict(model.state_dict());
  m->eval();
  return m;
}

}  // namespace relpos::train
