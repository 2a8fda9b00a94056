// trainers/data/text_data.cpp — character-level language modelling on a UTF-8 text file.
// Vocabulary: the distinct characters (code points) of the file, sorted; saved with each
// run so a checkpoint decodes the same way. Split: the first (1 - val_fraction) of the
// characters train (n_train = int(n * (1 - val_fraction))), the rest validate. A training batch
// is B random windows of seq_len + 1 characters (input = window[:-1], target = window[1:]),
// drawn with the trainer's data generator; validation batch i draws its B window starts from
// Generator(0x5EED0000 + i), start = n_train + next_u64() % (n - n_train - seq_len - 1), so it
// is the same every time (docs/model.md, "Evaluation windows").
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <array>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "trainers/data/data.h"
#include "trainers/io/file_io.h"

namespace relpos::train {

std::vector<std::string_view> utf8_char_views(std::string_view s, const std::string& source) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    // Strict UTF-8: what passes here can be saved in trainer_state.json (the vocabulary).
    size_t n = utf8_sequence_length(s, i);
    RELPOS_CHECK_CONFIG(n > 0, "{}: invalid UTF-8 at byte offset {}", source, i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::vector<std::string> utf8_chars(const std::string& s, const std::string& source) {
  const std::vector<std::string_view> views = utf8_char_views(s, source);
  return {views.begin(), views.end()};
}

std::vector<std::string> distinct_chars(const std::vector<std::string_view>& chars) {
  // ASCII (nearly every character of most files) through a table, the rest through a set.
  bool ascii[128] = {};
  std::unordered_set<std::string_view> other;
  for (std::string_view c : chars) {
    if (c.size() == 1 && static_cast<unsigned char>(c[0]) < 128)
      ascii[static_cast<unsigned char>(c[0])] = true;
    else
      other.insert(c);
  }
  std::vector<std::string> out(other.begin(), other.end());
  for (int b = 0; b < 128; ++b)
    if (ascii[b]) out.emplace_back(1, char(b));
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_text_file(const std::string& path) {
  std::string bytes;
  try {
    bytes = read_whole_file(path, "data file", kMaxDataFileBytes);
  } catch (const Error& e) {
    fail_config("data.path: {}", e.what());
  }
  RELPOS_CHECK_CONFIG(!bytes.empty(), "data.path: data file '{}' is empty", path);
  return bytes;
}

namespace {

class TextDataset : public Dataset {
 public:
  TextDataset(const Config& cfg, const std::vector<std::string>& vocab) : cfg_(cfg.data) {
    const std::string bytes = read_text_file(cfg_.path);
    const std::vector<std::string_view> chars = utf8_char_views(bytes, fmt::format("data file '{}'", cfg_.path));
    vocab_ = vocab.empty() ? distinct_chars(chars) : vocab;
    ascii_.fill(-1);
    for (size_t i = 0; i < vocab_.size(); ++i) {
      const std::string& c = vocab_[i];
      if (c.size() == 1 && static_cast<unsigned char>(c[0]) < 128) ascii_[static_cast<unsigned char>(c[0])] = int64_t(i);
      else index_.emplace(c, int64_t(i));
    }
    ids_.reserve(chars.size());
    for (size_t i = 0; i < chars.size(); ++i) {
      const int64_t id = id_of(chars[i]);
      RELPOS_CHECK(id >= 0, "data file '{}': character '{}' at position {} is not in the run's vocabulary", cfg_.path,
                   chars[i], i);
      ids_.push_back(id);
    }
    n_train_ = int64_t(double(ids_.size()) * (1.0 - cfg_.val_fraction));
    const int64_t need = cfg_.seq_len + 2;
    RELPOS_CHECK(n_train_ >= need && int64_t(ids_.size()) - n_train_ >= need,
                 "data file '{}' has {} characters: too short for seq_len {} with a {:.0f}% validation split (each "
                 "split needs at least {})",
                 cfg_.path, ids_.size(), cfg_.seq_len, cfg_.val_fraction * 100, need);
  }

  int64_t vocab_size() const override { return int64_t(vocab_.size()); }
  std::vector<std::string> vocabulary() const override { return vocab_; }

  Batch train_batch(Generator& gen) const override { return windows(0, n_train_, cfg_.seq_len, gen); }

  Batch val_batch(int64_t i, int64_t seq_len) const override {
    Generator g(0x5EED0000ULL + uint64_t(i));
    const int64_t lo = n_train_, hi = int64_t(ids_.size());
    RELPOS_CHECK(hi - lo >= seq_len + 2, "validation split has {} characters, too few for seq_len {}", hi - lo, seq_len);
    return windows(lo, hi, seq_len, g);
  }

  std::vector<int64_t> val_stream() const override { return {ids_.begin() + n_train_, ids_.end()}; }
  std::vector<int64_t> train_stream() const override { return {ids_.begin(), ids_.begin() + n_train_}; }

  std::vector<int64_t> encode(const std::string& text) const override {
    std::vector<int64_t> out;
    for (std::string_view c : utf8_char_views(text, "--prompt")) {
      const int64_t id = id_of(c);
      RELPOS_CHECK(id >= 0, "prompt character '{}' is not in the training vocabulary", c);
      out.push_back(id);
    }
    return out;
  }

  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string s;
    for (int64_t i : ids) s += (i >= 0 && i < int64_t(vocab_.size())) ? vocab_[size_t(i)] : "?";
    return s;
  }

 private:
  // The id of one character, or -1 when it is not in the vocabulary.
  int64_t id_of(std::string_view c) const {
    if (c.size() == 1 && static_cast<unsigned char>(c[0]) < 128) return ascii_[static_cast<unsigned char>(c[0])];
    auto it = index_.find(c);
    return it == index_.end() ? -1 : it->second;
  }

  Batch windows(int64_t lo, int64_t hi, int64_t L, Generator& g) const {
    const int64_t B = cfg_.batch_size;
    std::vector<int64_t> x(size_t(B * L)), y(size_t(B * L));
    for (int64_t b = 0; b < B; ++b) {
      int64_t s = lo + int64_t(g.next_u64() % uint64_t(hi - lo - L - 1));
      for (int64_t t = 0; t < L; ++t) {
        x[size_t(b * L + t)] = ids_[size_t(s + t)];
        y[size_t(b * L + t)] = ids_[size_t(s + t + 1)];
      }
    }
    return {Tensor::from_vector(x, {B, L}), Tensor::from_vector(y, {B, L}), Tensor(), Tensor()};
  }

  DataConfig cfg_;
  std::vector<std::string> vocab_;
  std::array<int64_t, 128> ascii_;                      // ASCII character -> id (-1: not in vocab_)
  std::unordered_map<std::string_view, int64_t> index_;  // other characters (views into vocab_)
  std::vector<int64_t> ids_;
  int64_t n_train_ = 0;
};

}  // namespace

std::unique_ptr<Dataset> make_subword_dataset(const Config& cfg, const DataContext& ctx);

// data.task 'text' (data_tasks.cpp): characters, or subwords (token_data.cpp).
std::unique_ptr<Dataset> make_text_dataset(const Config& cfg, const DataContext& ctx) {
  if (cfg.data.tokenizer.type == TokenizerType::SentencePiece) return make_subword_dataset(cfg, ctx);
  return std::make_unique<TextDataset>(cfg, ctx.vocab);
}

}  // namespace relpos::train
