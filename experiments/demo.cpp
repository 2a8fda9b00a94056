#include "experiments/demo.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <numbers>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/linear.h"
#include "nn/init.h"
#include "nn/optim/sgd.h"

namespace relpos::demo {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  RELPOS_CHECK(f.good(), "data file '{}' cannot be opened (does it exist?)", path);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  RELPOS_CHECK(!s.empty(), "data file '{}' is empty", path);
  return s;
}

// Bengio-style MLP LM: embed `context` chars, concatenate, hidden GELU layer, logits.
struct CharMlp : nn::Module {
  Variable emb;  // [V, E]
  std::shared_ptr<nn::Linear> fc1, fc2;
  CharMlp(int64_t vocab, const CharMlpConfig& c, Generator& gen) {
    emb = register_parameter("embed.weight", nn::init::normal({vocab, c.embed}, 1.0, gen));
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(c.context * c.embed, c.hidden, true, gen));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(c.hidden, vocab, true, gen));
  }
  // idx: int64 [B, context] -> logits [B, V]
  Variable forward(const Tensor& idx) const {
    Variable x = embedding(emb, idx);                     // [B, T, E]
    x = reshape(x, {idx.size(0), -1});                    // [B, T*E]
    return fc2->forward(gelu(fc1->forward(x)));           // [B, V]
  }
};

// The text as byte-level character ids (the characters that occur, in byte order), split
// into a training and a validation part.
struct CharData {
  std::string text, chars;  // chars[id] is the byte of character id
  std::vector<int64_t> ids;
  int64_t V = 0, n = 0, n_train = 0;
};

CharData load_chars(const CharMlpConfig& cfg) {
  CharData d;
  d.text = read_text(cfg.data_path);
  std::vector<int64_t> to_id(256, -1);
  for (unsigned char c : d.text) to_id[c] = 0;
  for (int c = 0; c < 256; ++c)
    if (to_id[c] == 0) {
      to_id[c] = int64_t(d.chars.size());
      d.chars.push_back(char(c));
    }
  d.V = int64_t(d.chars.size());
  d.ids.resize(d.text.size());
  for (size_t i = 0; i < d.text.size(); ++i) d.ids[i] = to_id[(unsigned char)d.text[i]];
  d.n = int64_t(d.ids.size());
  d.n_train = int64_t(double(d.n) * (1.0 - cfg.val_fraction));
  RELPOS_CHECK(d.n_train > cfg.context + 1 && d.n - d.n_train > cfg.context + 1,
               "data file '{}' has {} characters: too short for context {} with a {:.0f}% validation split",
               cfg.data_path, d.n, cfg.context, cfg.val_fraction * 100);
  return d;
}

// Cross-entropy of the add-one-smoothed unigram of the training part on the validation part.
double unigram_val_loss(const CharData& d) {
  std::vector<double> freq(size_t(d.V), 1.0);
  for (int64_t i = 0; i < d.n_train; ++i) freq[size_t(d.ids[size_t(i)])] += 1.0;
  double tot = 0;
  for (double f : freq) tot += f;
  double ce = 0;
  for (int64_t i = d.n_train; i < d.n; ++i) ce -= std::log(freq[size_t(d.ids[size_t(i)])] / tot);
  return ce / double(d.n - d.n_train);
}

// cfg.batch random windows of positions [lo, hi): contexts x [B, context], next characters y [B].
void char_batch(const CharData& d, const CharMlpConfig& cfg, int64_t lo, int64_t hi, Generator& g, Tensor& x,
                Tensor& y) {
  std::vector<int64_t> xs(size_t(cfg.batch * cfg.context)), ys(size_t(cfg.batch));
  for (int64_t b = 0; b < cfg.batch; ++b) {
    int64_t s = lo + int64_t(g.next_u64() % uint64_t(hi - lo - cfg.context));
    for (int64_t t = 0; t < cfg.context; ++t) xs[size_t(b * cfg.context + t)] = d.ids[size_t(s + t)];
    ys[size_t(b)] = d.ids[size_t(s + cfg.context)];
  }
  x = Tensor::from_vector(xs, {cfg.batch, cfg.context});
  y = Tensor::from_vector(ys, {cfg.batch});
}

// Mean loss over cfg.eval_batches validation batches (the same batches every time).
double char_val_loss(const CharMlp& model, const CharData& d, const CharMlpConfig& cfg) {
  NoGradGuard ng;
  Generator g(cfg.seed + 2);
  double tot = 0;
  for (int64_t i = 0; i < cfg.eval_batches; ++i) {
    Tensor x, y;
    char_batch(d, cfg, d.n_train, d.n, g, x, y);
    tot += cross_entropy(model.forward(x), y).item();
  }
  return tot / double(cfg.eval_batches);
}

// cfg.sample_chars characters drawn from the model (seeded), after the text's first context.
std::string char_sample(const CharMlp& model, const CharData& d, const CharMlpConfig& cfg) {
  NoGradGuard ng;
  Generator g(cfg.seed + 3);
  std::vector<int64_t> ctx(d.ids.begin(), d.ids.begin() + cfg.context);
  std::string out(d.text.begin(), d.text.begin() + cfg.context);
  for (int64_t i = 0; i < cfg.sample_chars; ++i) {
    Tensor x = Tensor::from_vector(ctx, {1, cfg.context});
    std::vector<double> p = softmax(model.forward(x), -1).data().to_vector<double>();
    double r = g.uniform(), acc = 0;
    int64_t c = d.V - 1;
    for (int64_t j = 0; j < d.V; ++j) {
      acc += p[size_t(j)];
      if (r < acc) {
        c = j;
        break;
      }
    }
    out.push_back(d.chars[size_t(c)]);
    ctx.erase(ctx.begin());
    ctx.push_back(c);
  }
  return out;
}

}  // namespace

CharMlpResult train_char_mlp(const CharMlpConfig& cfg, const std::function<void(const std::string&)>& log) {
  auto say = [&](const std::string& s) {
    if (log) log(s);
  };
  RELPOS_CHECK(cfg.steps > 0 && cfg.batch > 0 && cfg.context > 0, "demo: steps, batch and context must be positive");
  auto t0 = std::chrono::steady_clock::now();
  const CharData d = load_chars(cfg);
  say(fmt::format("data: {} ({} chars, vocab {}), train {} / val {}", cfg.data_path, d.n, d.V, d.n_train,
                  d.n - d.n_train));
  CharMlpResult res;
  res.unigram_val_loss = unigram_val_loss(d);
  Generator gen(cfg.seed);
  CharMlp model(d.V, cfg, gen);
  say(fmt::format("model: char MLP, context {}, embed {}, hidden {}, {} parameters", cfg.context, cfg.embed,
                  cfg.hidden, model.num_parameters()));
  nn::optim::SGD opt(model.parameters(), {cfg.lr, cfg.momentum, 0.0});
  Generator data_gen(cfg.seed + 1);
  for (int64_t step = 1; step <= cfg.steps; ++step) {
    double lr = cfg.lr * (0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * double(step - 1) / double(cfg.steps))));
    opt.set_lr(lr);
    Tensor x, y;
    char_batch(d, cfg, 0, d.n_train, data_gen, x, y);
    Variable loss = cross_entropy(model.forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    res.losses.push_back(loss.item());
    if (step % cfg.eval_every == 0 || step == cfg.steps) {
      double recent = 0;
      int64_t k = std::min<int64_t>(cfg.eval_every, step);
      for (int64_t i = step - k; i < step; ++i) recent += res.losses[size_t(i)];
      res.final_train_loss = recent / double(k);
      res.final_val_loss = char_val_loss(model, d, cfg);
      say(fmt::format("step {:5d}/{} | train loss {:.4f} | val loss {:.4f} | lr {:.4f}", step, cfg.steps,
                      res.final_train_loss, res.final_val_loss, lr));
    }
  }
  res.sample = char_sample(model, d, cfg);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

RegressionResult train_mlp_regression(uint64_t seed, int64_t steps, int64_t hidden, double lr, double momentum) {
  Generator gen(seed);
  const int64_t N = 256;
  Tensor x = Tensor::rand({N, 2}, gen, DType::F32, -1.0, 1.0);
  std::vector<float> xv = x.to_vector<float>(), yv(N);
  for (int64_t i = 0; i < N; ++i) {
    float a = xv[size_t(2 * i)], b = xv[size_t(2 * i + 1)];
    yv[size_t(i)] = std::sin(2 * a) + b * b - 0.5f * a * b;
  }
  Tensor y = Tensor::from_vector(yv, {N, 1});
  nn::Linear fc1(2, hidden, true, gen), fc2(hidden, 1, true, gen);
  std::vector<Variable> params = fc1.parameters();
  for (auto& p : fc2.parameters()) params.push_back(p);
  nn::optim::SGD opt(params, {lr, momentum, 0.0});
  Variable xin(x), target(y);
  RegressionResult res;
  for (int64_t s = 0; s < steps; ++s) {
    Variable err = fc2.forward(tanh(fc1.forward(xin))) - target;
    Variable loss = mean(err * err);
    opt.zero_grad();
    loss.backward();
    opt.step();
    res.losses.push_back(loss.item());
  }
  {
    NoGradGuard ng;
    Variable err = fc2.forward(tanh(fc1.forward(xin))) - target;
    res.final_mse = mean(err * err).item();
  }
  return res;
}

}  // namespace relpos::demo
