// trainers/data/tasks.cpp — synthetic sequence tasks with a length parameter, for all three
// model kinds. Tokens: 0 PAD, 1 BOS, 2 SEP, 3 EOS, then the task's symbols 4 .. 4+V-1.
//   copy      x = n random symbols               y = x
//   reverse                                       y = reversed x
//   sort                                          y = x sorted
//   recall    x = k1 v1 .. kn vn q (keys distinct, q one of them)     y = [value of q]
//   addition  x = n digits of a, '+', n digits of b (most significant first)
//             y = the n+1 digits of a + b (symbols 0..9 are digits, symbol 10 is '+')
// Layouts (targets are kIgnore where no loss is taken, and at padding):
//   decoder          input [BOS x SEP y]  target [.. ignored .. y EOS]   (next token)
//   encoder          input x              target y (per token; copy/reverse/sort only)
//   encoder_decoder  source x (+ padding mask), decoder input [BOS y], target [y EOS]
// Training lengths n are uniform in [min_len, seq_len] (min_len 0 means n = seq_len);
// validation batch i at length L uses exactly n = L (length extrapolation).
#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "trainers/data/data_tasks.h"

namespace relpos::train {

namespace {

constexpr int64_t PAD = 0, BOS = 1, SEP = 2, EOS = 3, FIRST = 4;

class SyntheticDataset : public Dataset {
 public:
  explicit SyntheticDataset(const Config& cfg) : d_(cfg.data), kind_(cfg.model.kind) {
    const std::string& t = d_.task;
    const DataTask& task = find_data_task(t);
    RELPOS_CHECK_CONFIG(d_.vocab_size >= task.min_vocab, "data.task '{}' needs data.vocab_size >= {} ({}), got {}", t,
                        task.min_vocab, task.min_vocab_reason, d_.vocab_size);
    RELPOS_CHECK_CONFIG(!(kind_ == nn::ModelKind::Encoder && task.output_length_differs),
                        "data.task '{}' has an output of another length than its input; use a decoder or an "
                        "encoder_decoder (an encoder labels each input token)",
                        t);
    RELPOS_CHECK_CONFIG(!(t == "recall" && pairs(d_.seq_len) > d_.vocab_size),
                        "data.task 'recall' with seq_len {} needs {} distinct keys but data.vocab_size is {}",
                        d_.seq_len, pairs(d_.seq_len), d_.vocab_size);
  }

  int64_t vocab_size() const override { return d_.vocab_size + FIRST; }

  Batch train_batch(Generator& g) const override {
    std::vector<Example> ex;
    const int64_t lo = d_.min_len > 0 ? d_.min_len : d_.seq_len;
    for (int64_t b = 0; b < d_.batch_size; ++b) {
      int64_t n = lo + int64_t(g.next_u64() % uint64_t(d_.seq_len - lo + 1));
      ex.push_back(make_example(n, g));
    }
    return collate(ex, d_.seq_len);
  }

  Batch val_batch(int64_t i, int64_t seq_len) const override {
    RELPOS_CHECK(seq_len >= 1, "validation length must be positive, got {}", seq_len);
    Generator g(0xE7A10000ULL + uint64_t(i));
    std::vector<Example> ex;
    for (int64_t b = 0; b < d_.batch_size; ++b) ex.push_back(make_example(seq_len, g));
    return collate(ex, seq_len);
  }

  std::vector<int64_t> encode(const std::string& text) const override {
    std::vector<int64_t> out;
    std::istringstream ss(text);
    for (std::string w; ss >> w;) {
      if (w == "<bos>") out.push_back(BOS);
      else if (w == "<sep>") out.push_back(SEP);
      else {
        int64_t v = -1;
        try {
          v = std::stoll(w);
        } catch (...) {
        }
        RELPOS_CHECK(v >= 0 && v < d_.vocab_size, "prompt token '{}': expected <bos>, <sep> or a symbol 0..{}", w,
                     d_.vocab_size - 1);
        out.push_back(FIRST + v);
      }
    }
    return out;
  }

  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string s;
    for (int64_t i : ids) {
      if (!s.empty()) s += ' ';
      s += i == PAD ? "<pad>" : i == BOS ? "<bos>" : i == SEP ? "<sep>" : i == EOS ? "<eos>"
           : (d_.task == "addition" && i - FIRST == 10) ? "+"
                                                        : std::to_string(i - FIRST);
    }
    return s;
  }

 private:
  struct Example {
    std::vector<int64_t> x, y;
  };
  static int64_t pairs(int64_t n) { return std::max<int64_t>(1, n / 2); }

  int64_t sym(Generator& g) const { return FIRST + int64_t(g.next_u64() % uint64_t(d_.vocab_size)); }

  Example make_example(int64_t n, Generator& g) const {
    Example e;
    const std::string& t = d_.task;
    if (t == "copy" || t == "reverse" || t == "sort") {
      for (int64_t i = 0; i < n; ++i) e.x.push_back(sym(g));
      e.y = e.x;
      if (t == "reverse") std::reverse(e.y.begin(), e.y.end());
      if (t == "sort") std::sort(e.y.begin(), e.y.end());
    } else if (t == "recall") {
      const int64_t p = pairs(n);
      std::vector<int64_t> keys(size_t(d_.vocab_size));
      for (int64_t i = 0; i < d_.vocab_size; ++i) keys[size_t(i)] = FIRST + i;
      for (int64_t i = 0; i < p; ++i) std::swap(keys[size_t(i)], keys[size_t(i + int64_t(g.next_u64() % uint64_t(d_.vocab_size - i)))]);
      std::vector<int64_t> vals;
      for (int64_t i = 0; i < p; ++i) {
        vals.push_back(sym(g));
        e.x.push_back(keys[size_t(i)]);
        e.x.push_back(vals.back());
      }
      int64_t q = int64_t(g.next_u64() % uint64_t(p));
      e.x.push_back(keys[size_t(q)]);
      e.y = {vals[size_t(q)]};
    } else {  // addition
      std::vector<int64_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
      for (auto& d : a) d = int64_t(g.next_u64() % 10);
      for (auto& d : b) d = int64_t(g.next_u64() % 10);
      for (int64_t d : a) e.x.push_back(FIRST + d);
      e.x.push_back(FIRST + 10);
      for (int64_t d : b) e.x.push_back(FIRST + d);
      std::vector<int64_t> sum(size_t(n + 1));
      int64_t carry = 0;
      for (int64_t i = n - 1; i >= 0; --i) {
        int64_t s = a[size_t(i)] + b[size_t(i)] + carry;
        sum[size_t(i + 1)] = s % 10;
        carry = s / 10;
      }
      sum[0] = carry;
      for (int64_t d : sum) e.y.push_back(FIRST + d);
    }
    return e;
  }

  // Pads every example to the longest the task can produce at length n_max.
  Batch collate(const std::vector<Example>& ex, int64_t n_max) const {
    const int64_t B = int64_t(ex.size());
    size_t xmax = 0, ymax = 0;
    for (const auto& e : ex) xmax = std::max(xmax, e.x.size()), ymax = std::max(ymax, e.y.size());
    (void)n_max;
    Batch out;
    if (kind_ == nn::ModelKind::Decoder) {
      const int64_t L = int64_t(xmax + ymax + 2);  // [BOS x SEP y EOS] minus one
      std::vector<int64_t> in(size_t(B * L), PAD), tg(size_t(B * L), kIgnore);
      for (int64_t b = 0; b < B; ++b) {
        std::vector<int64_t> seq{BOS};
        seq.insert(seq.end(), ex[size_t(b)].x.begin(), ex[size_t(b)].x.end());
        seq.push_back(SEP);
        const size_t y0 = seq.size();
        seq.insert(seq.end(), ex[size_t(b)].y.begin(), ex[size_t(b)].y.end());
        seq.push_back(EOS);
        for (size_t t = 0; t + 1 < seq.size(); ++t) {
          in[size_t(b * L) + t] = seq[t];
          if (t + 1 >= y0) tg[size_t(b * L) + t] = seq[t + 1];
        }
      }
      out.input = Tensor::from_vector(in, {B, L});
      out.target = Tensor::from_vector(tg, {B, L});
      return out;
    }
    const int64_t Lx = int64_t(xmax);
    std::vector<int64_t> in(size_t(B * Lx), PAD);
    std::vector<double> pad(size_t(B * Lx), 1.0);
    for (int64_t b = 0; b < B; ++b)
      for (size_t t = 0; t < ex[size_t(b)].x.size(); ++t) {
        in[size_t(b * Lx) + t] = ex[size_t(b)].x[t];
        pad[size_t(b * Lx) + t] = 0.0;
      }
    out.input = Tensor::from_vector(in, {B, Lx});
    out.padding = Tensor::from_vector(pad, {B, Lx});
    if (kind_ == nn::ModelKind::Encoder) {
      std::vector<int64_t> tg(size_t(B * Lx), kIgnore);
      for (int64_t b = 0; b < B; ++b)
        for (size_t t = 0; t < ex[size_t(b)].y.size(); ++t) tg[size_t(b * Lx) + t] = ex[size_t(b)].y[t];
      out.target = Tensor::from_vector(tg, {B, Lx});
      return out;
    }
    const int64_t Ly = int64_t(ymax + 1);
    std::vector<int64_t> din(size_t(B * Ly), PAD), tg(size_t(B * Ly), kIgnore);
    for (int64_t b = 0; b < B; ++b) {
      const auto& y = ex[size_t(b)].y;
      din[size_t(b * Ly)] = BOS;
      for (size_t t = 0; t < y.size(); ++t) {
        din[size_t(b * Ly) + t + 1] = y[t];
        tg[size_t(b * Ly) + t] = y[t];
      }
      tg[size_t(b * Ly) + y.size()] = EOS;
    }
    out.dec_input = Tensor::from_vector(din, {B, Ly});
    out.target = Tensor::from_vector(tg, {B, Ly});
    return out;
  }

  DataConfig d_;
  nn::ModelKind kind_;
};

}  // namespace

std::unique_ptr<Dataset> make_synthetic_dataset(const Config& cfg) { return std::make_unique<SyntheticDataset>(cfg); }

}  // namespace relpos::train
