// trainers/data/token_data.cpp — language modelling on tokens: data.task 'tokens' (a relpos token
// file or llm.c shards, token_file.h) and data.task 'text' with SentencePiece subwords
// (data.tokenizer.type sentencepiece), which encodes the text into a token file cached in the run.
// Split by example: with data.val_path, that file validates and all of data.path trains; otherwise
// the last max(1, floor(n_examples * val_fraction)) examples validate (a token file of one example
// cannot be split: give data.val_path). Batches are windows of seq_len + 1 consecutive tokens of a
// split, drawn as the text task draws them (text_data.cpp; windows may cross example boundaries,
// as nanoGPT's do), read from the memory-mapped file.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "nn/positional/registry.h"
#include "trainers/data/data.h"
#include "trainers/data/data_tasks.h"
#include "trainers/data/token_file.h"
#include "trainers/data/tokenizer.h"
#include "trainers/io/file_io.h"

namespace relpos::train {

namespace fs = std::filesystem;

namespace {
const SubwordBackend* g_backend = nullptr;
}

void register_subword_backend(const SubwordBackend* backend) { g_backend = backend; }
const SubwordBackend* subword_backend() { return g_backend; }

namespace {

// A newline inside an example, as the subword model sees it (SentencePiece reads one sentence per
// line): U+23CE RETURN SYMBOL, a user-defined piece; decoding maps it back.
const std::string kNewline = "\xE2\x8F\x8E";

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

// A validation file must share the training file's vocabulary.
void check_same_vocab(const TokenFile& val, const TokenFile& train) {
  RELPOS_CHECK_CONFIG(val.info().vocab_size == train.info().vocab_size,
                      "data.val_path '{}' has vocabulary size {}, data.path '{}' has {}", val.path(),
                      val.info().vocab_size, train.path(), train.info().vocab_size);
}

// How many of a file's examples train when it is split by example (data.val_fraction of them,
// at least one, validate; at least one trains).
uint64_t training_examples(const TokenFile& f, double val_fraction) {
  const TokenFileInfo& in = f.info();
  RELPOS_CHECK_CONFIG(in.n_examples >= 2,
                      "data.path '{}' holds {} example: a train/validation split by example needs at least 2 (or "
                      "give the validation file as data.val_path)",
                      f.path(), in.n_examples);
  return in.n_examples - std::clamp<uint64_t>(uint64_t(double(in.n_examples) * val_fraction), 1, in.n_examples - 1);
}

// The indices, in `f`, of the channels data.position_channels names (each per token), in that order.
std::vector<size_t> position_channel_indices(const TokenFile& f, const std::vector<std::string>& names) {
  const auto& ch = f.info().channels;
  std::vector<size_t> out;
  for (const std::string& name : names) {
    size_t c = 0;
    while (c < ch.size() && ch[c].name != name) ++c;
    if (c == ch.size()) {
      std::vector<std::string> have;
      for (const auto& x : ch) have.push_back(x.name);
      fail_config("data.position_channels: token file '{}' has no channel '{}' (its channels: {})", f.path(), name,
                  have.empty() ? "none" : fmt::format("{}", fmt::join(have, ", ")));
    }
    RELPOS_CHECK_CONFIG(ch[c].scope == ChannelScope::Token,
                        "data.position_channels: channel '{}' of token file '{}' holds one value per example; position "
                        "channels are per token",
                        name, f.path());
    out.push_back(c);
  }
  return out;
}

// A token file whose position channels include `row` and `col` (a grid, nn/positional/grid.h): the
// declared ranges give the grid, rows 0..H-1 and cols 0..W-1, and every example must be that whole
// grid in row-major order (token t at row t / W, col t % W), so a batch of its examples is one
// grid size. Returns H x W (0 when the channels do not name a grid). Errors name the file (`what`:
// "data.path"), the example, the token and the channel.
int64_t check_grid_examples(const TokenFile& f, const std::string& what, const std::vector<std::string>& names,
                            const std::vector<size_t>& cols) {
  size_t r = SIZE_MAX, c = SIZE_MAX;
  for (size_t p = 0; p < names.size(); ++p) {
    if (names[p] == "row") r = cols[p];
    if (names[p] == "col") c = cols[p];
  }
  if (r == SIZE_MAX || c == SIZE_MAX) return 0;
  const TokenChannel &rc = f.info().channels[r], &cc = f.info().channels[c];
  RELPOS_CHECK_CONFIG(rc.min == 0 && cc.min == 0,
                      "{} '{}': channels 'row' and 'col' declare the ranges [{}, {}] and [{}, {}]; a grid's "
                      "coordinates start at 0",
                      what, f.path(), rc.min, rc.max, cc.min, cc.max);
  const int64_t H = rc.max + 1, W = cc.max + 1;
  for (uint64_t e = 0; e < f.info().n_examples; ++e) {
    const uint64_t s = f.example_start(e), n = f.example_start(e + 1) - s;
    RELPOS_CHECK_CONFIG(int64_t(n) == H * W,
                        "{} '{}': example {} has {} tokens, but the file's channels 'row' [0, {}] and 'col' [0, {}] "
                        "make every example a {}x{} grid of {} tokens (one grid size per file: a batch never mixes "
                        "sizes)",
                        what, f.path(), e, n, H - 1, W - 1, H, W, H * W);
    for (uint64_t t = 0; t < n; ++t) {
      const int64_t rv = f.channel(r, s + t), cv = f.channel(c, s + t);
      const bool row_ok = rv == int64_t(t) / W;
      RELPOS_CHECK_CONFIG(row_ok && cv == int64_t(t) % W,
                          "{} '{}': example {}, token {}: channel '{}' is {}, expected {} (an example's tokens are its "
                          "{}x{} grid in row-major order: token t at row t / {}, col t % {})",
                          what, f.path(), e, t, row_ok ? "col" : "row", row_ok ? cv : rv,
                          row_ok ? int64_t(t) % W : int64_t(t) / W, H, W, W, W);
    }
  }
  return H * W;
}

// model.position.distance naming a channel: its values are positions along the sequence, so
// within every example of `f` they must not decrease (a distance-indexed encoding reads kj - qi
// from them; a causal query would otherwise see earlier keys at positive distances).
void check_distance_channel(const TokenFile& f, const std::vector<size_t>& cols, const Config& cfg) {
  const std::string& name = cfg.model.position_distance;
  const auto& names = cfg.data.position_channels;
  const auto it = std::find(names.begin(), names.end(), name);
  if (name == "index" || it == names.end()) return;  // the model refuses a channel the data lacks
  const size_t c = cols[size_t(it - names.begin())];
  for (uint64_t e = 0; e < f.info().n_examples; ++e) {
    const uint64_t a = f.example_start(e), z = f.example_start(e + 1);
    int64_t prev = f.channel(c, a);
    for (uint64_t i = a + 1; i < z; ++i) {
      const int64_t v = f.channel(c, i);
      RELPOS_CHECK_CONFIG(
          v >= prev,
          "token file '{}', example {} (tokens {}..{}), channel '{}': the value goes backwards at token "
          "{} ({} after {}); model.position.distance reads distances from '{}', so it must not "
          "decrease within an example",
          f.path(), e, a, z - 1, name, i, v, prev, name);
      prev = v;
    }
  }
}

// Per-token position channels of a batch: positions[b, t, p] = channel cols[p] of token at(b, t),
// 0 where at(b, t) is npos (padding). Undefined when no channels are configured.
template <typename At>
Tensor position_rows(const TokenFile& f, const std::vector<size_t>& cols, int64_t B, int64_t L, const At& at) {
  if (cols.empty()) return {};
  const int64_t P = int64_t(cols.size());
  std::vector<int64_t> v(size_t(B * L * P), 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < L; ++t)
      if (const uint64_t i = at(b, t); i != UINT64_MAX)
        for (int64_t p = 0; p < P; ++p) v[size_t((b * L + t) * P + p)] = f.channel(cols[size_t(p)], i);
  return Tensor::from_vector(v, {B, L, P});
}

class TokenDataset : public Dataset {
 public:
  // train: data.path (null when the file is not at hand: a vocabulary-only dataset that samples but
  // has no batches); val: data.val_path or null (split train by example).
  TokenDataset(const Config& cfg, std::shared_ptr<TokenFile> train, std::shared_ptr<TokenFile> val,
               int64_t vocab_size, std::vector<std::string> vocab, std::shared_ptr<SubwordModel> sub = nullptr,
               std::string sub_info = "")
      : cfg_(cfg.data), train_(std::move(train)), val_(std::move(val)), vocab_size_(vocab_size),
        vocab_(std::move(vocab)), sub_(std::move(sub)), sub_info_(std::move(sub_info)) {
    if (!train_) return;
    const TokenFileInfo& in = train_->info();
    train_cols_ = val_cols_ = position_channel_indices(*train_, cfg_.position_channels);
    check_distance_channel(*train_, train_cols_, cfg);
    if (val_) {
      check_same_vocab(*val_, *train_);
      val_cols_ = position_channel_indices(*val_, cfg_.position_channels);
      check_distance_channel(*val_, val_cols_, cfg);
      train_end_ = in.n_tokens;
      val_begin_ = 0;
      val_end_ = val_->info().n_tokens;
    } else {
      train_end_ = val_begin_ = train_->example_start(training_examples(*train_, cfg_.val_fraction));
      val_end_ = in.n_tokens;
    }
    const int64_t need = cfg_.seq_len + 2;
    RELPOS_CHECK_CONFIG(int64_t(train_end_) >= need && int64_t(val_end_ - val_begin_) >= need,
                        "data.path '{}': the training split has {} tokens and the validation split {}: too few for "
                        "seq_len {} (each needs at least {})",
                        train_->path(), train_end_, val_end_ - val_begin_, cfg_.seq_len, need);
  }

  int64_t vocab_size() const override { return vocab_size_; }
  std::vector<std::string> vocabulary() const override { return vocab_; }
  std::string tokenizer_model() const override { return sub_ ? sub_->serialized() : std::string(); }
  std::string tokenizer_info() const override { return sub_info_; }

  Batch train_batch(Generator& gen) const override {
    need_files("training");
    return windows(*train_, train_cols_, 0, train_end_, cfg_.seq_len, gen);
  }

  Batch val_batch(int64_t i, int64_t seq_len) const override {
    need_files("evaluation");
    Generator g(0x5EED0000ULL + uint64_t(i));
    RELPOS_CHECK(int64_t(val_end_ - val_begin_) >= seq_len + 2, "validation split has {} tokens, too few for seq_len {}",
                 val_end_ - val_begin_, seq_len);
    return windows(val_file(), val_cols_, val_begin_, val_end_, seq_len, g);
  }

  std::vector<int64_t> val_stream() const override {
    need_files("evaluation");
    return val_file().tokens(val_begin_, val_end_);
  }
  std::vector<int64_t> train_stream() const override {
    need_files("training");
    return train_->tokens(0, train_end_);
  }

  std::vector<int64_t> encode(const std::string& text) const override {
    if (text.empty()) return {};
    if (sub_) return sub_->encode(replace_all(text, "\n", kNewline));
    if (!vocab_.empty()) return longest_match(text);
    // No strings: the prompt is token ids separated by spaces.
    std::vector<int64_t> out;
    std::istringstream in(text);
    for (std::string w; in >> w;) {
      int64_t id = -1;
      try {
        size_t used = 0;
        id = std::stoll(w, &used);
        if (used != w.size()) id = -1;
      } catch (const std::exception&) {
        id = -1;
      }
      RELPOS_CHECK_CONFIG(id >= 0 && id < vocab_size_,
                          "--prompt: '{}' is not a token id in [0, {}) (this run's token file stores no vocabulary "
                          "strings, so a prompt is token ids separated by spaces)",
                          w, vocab_size_);
      out.push_back(id);
    }
    return out;
  }

  int64_t start_token() const override {
    if (!sub_) return 0;
    const std::vector<int64_t> nl = sub_->encode(kNewline);
    return nl.size() == 1 ? nl[0] : 0;
  }

  std::string decode(const std::vector<int64_t>& ids) const override {
    if (sub_) return replace_all(sub_->decode(ids), kNewline, "\n");
    std::string s;
    for (size_t k = 0; k < ids.size(); ++k) {
      const int64_t i = ids[k];
      if (!vocab_.empty()) s += (i >= 0 && i < int64_t(vocab_.size())) ? vocab_[size_t(i)] : "?";
      else s += fmt::format("{}{}", k ? " " : "", i);
    }
    return s;
  }

 private:
  void need_files(const char* what) const {
    if (!train_)
      fail_config("data.path '{}' is not readable here{}: {} needs the tokens (sampling does not; copy the whole run "
                  "directory, whose data/ holds a subword run's encoded tokens)",
                  cfg_.path, sub_ ? " and the run holds no token cache (data/tokens.rptok)" : "", what);
  }
  const TokenFile& val_file() const { return val_ ? *val_ : *train_; }

  std::vector<int64_t> longest_match(const std::string& text) const {
    if (index_.empty())
      for (size_t i = 0; i < vocab_.size(); ++i) index_.emplace(vocab_[i], int64_t(i)), longest_ = std::max(longest_, vocab_[i].size());
    std::vector<int64_t> out;
    for (size_t at = 0; at < text.size();) {
      size_t n = std::min(longest_, text.size() - at);
      for (; n > 0; --n)
        if (auto it = index_.find(text.substr(at, n)); it != index_.end()) {
          out.push_back(it->second);
          break;
        }
      RELPOS_CHECK_CONFIG(n > 0, "--prompt: no vocabulary string matches the text at byte {} ('{}')", at,
                          text.substr(at, 8));
      at += n;
    }
    return out;
  }

  Batch windows(const TokenFile& f, const std::vector<size_t>& cols, uint64_t lo, uint64_t hi, int64_t L,
                Generator& g) const {
    const int64_t B = cfg_.batch_size;
    std::vector<int64_t> x(size_t(B * L)), y(size_t(B * L));
    std::vector<uint64_t> first(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
      const uint64_t s = first[size_t(b)] = lo + g.next_u64() % (hi - lo - uint64_t(L) - 1);
      int64_t prev = int64_t(f.token(s));
      for (int64_t t = 0; t < L; ++t) {
        const int64_t next = int64_t(f.token(s + uint64_t(t) + 1));
        x[size_t(b * L + t)] = prev;
        y[size_t(b * L + t)] = next;
        prev = next;
      }
    }
    Batch out{Tensor::from_vector(x, {B, L}), Tensor::from_vector(y, {B, L}), Tensor(), Tensor()};
    out.positions = position_rows(f, cols, B, L, [&](int64_t b, int64_t t) { return first[size_t(b)] + uint64_t(t); });
    return out;
  }

  DataConfig cfg_;
  std::shared_ptr<TokenFile> train_, val_;
  std::vector<size_t> train_cols_, val_cols_;  // data.position_channels in each file
  uint64_t train_end_ = 0, val_begin_ = 0, val_end_ = 0;
  int64_t vocab_size_ = 0;
  std::vector<std::string> vocab_;
  std::shared_ptr<SubwordModel> sub_;
  std::string sub_info_;
  mutable std::map<std::string, int64_t> index_;
  mutable size_t longest_ = 0;
};

// data.task token_labels: an encoder labels a token file's examples from its `label` channel. One
// example per batch row, its first seq_len tokens, padded (mask 1, target kIgnore) to seq_len; the
// targets are the per-token labels (a token-scope channel) or, for a per-example label, the label
// at position 0 (a sequence classifier; the other positions take no loss).
class TokenLabelDataset : public Dataset {
 public:
  TokenLabelDataset(const Config& cfg, std::shared_ptr<TokenFile> train, std::shared_ptr<TokenFile> val)
      : cfg_(cfg.data), train_(std::move(train)), val_(std::move(val)) {
    const TokenFileInfo& in = train_->info();
    label_ = find_label(*train_);
    train_cols_ = val_cols_ = position_channel_indices(*train_, cfg_.position_channels);
    train_grid_ = val_grid_ = check_grid_examples(*train_, "data.path", cfg_.position_channels, train_cols_);
    check_distance_channel(*train_, train_cols_, cfg);
    if (val_) {
      check_same_vocab(*val_, *train_);
      val_label_ = find_label(*val_);
      val_cols_ = position_channel_indices(*val_, cfg_.position_channels);
      val_grid_ = check_grid_examples(*val_, "data.val_path", cfg_.position_channels, val_cols_);
      check_distance_channel(*val_, val_cols_, cfg);
      RELPOS_CHECK_CONFIG(val_->info().channels[val_label_].scope == in.channels[label_].scope,
                          "data.val_path '{}': its 'label' channel has another scope than data.path's", val_->path());
      train_n_ = in.n_examples;
      val_lo_ = 0, val_hi_ = val_->info().n_examples;
    } else {
      train_n_ = val_lo_ = training_examples(*train_, cfg_.val_fraction);
      val_hi_ = in.n_examples;
      val_label_ = label_;
    }
  }

  int64_t vocab_size() const override { return int64_t(train_->info().vocab_size); }
  std::vector<std::string> vocabulary() const override { return train_->info().vocab; }

  Batch train_batch(Generator& gen) const override {
    check_grid_length(*train_, "data.path", train_grid_, cfg_.seq_len, "data.seq_len");
    return rows(*train_, label_, train_cols_, 0, train_n_, cfg_.seq_len, gen);
  }
  Batch val_batch(int64_t i, int64_t seq_len) const override {
    check_grid_length(val_file(), val_ ? "data.val_path" : "data.path", val_grid_, seq_len, "the evaluation length");
    Generator g(0x5EED0000ULL + uint64_t(i));
    return rows(val_file(), val_label_, val_cols_, val_lo_, val_hi_, seq_len, g);
  }
  int64_t val_examples() const override { return int64_t(val_hi_ - val_lo_); }
  Batch val_examples_batch(int64_t first, int64_t count, int64_t seq_len) const override {
    RELPOS_CHECK(first >= 0 && count >= 1 && first + count <= val_examples(),
                 "validation examples {}..{} requested; the split holds {}", first, first + count - 1, val_examples());
    std::vector<uint64_t> ex(static_cast<size_t>(count));
    for (int64_t b = 0; b < count; ++b) ex[size_t(b)] = val_lo_ + uint64_t(first + b);
    check_grid_length(val_file(), val_ ? "data.val_path" : "data.path", val_grid_, seq_len, "the evaluation length");
    return rows_of(val_file(), val_label_, val_cols_, ex, seq_len);
  }
  std::vector<int64_t> encode(const std::string& text) const override {
    std::vector<int64_t> out;
    std::istringstream in(text);
    for (int64_t id; in >> id;) out.push_back(id);
    return out;
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string s;
    for (size_t k = 0; k < ids.size(); ++k) s += fmt::format("{}{}", k ? " " : "", ids[k]);
    return s;
  }

 private:
  const TokenFile& val_file() const { return val_ ? *val_ : *train_; }
  // A grid file's examples are whole grids: a window shorter than the grid would cut them.
  static void check_grid_length(const TokenFile& f, const char* what, int64_t grid, int64_t L, const char* which) {
    RELPOS_CHECK_CONFIG(grid == 0 || L >= grid,
                        "{} '{}': its examples are grids of {} tokens (channels 'row' and 'col'), but {} is {}: a "
                        "batch row would cut its grid; use {} or more (e.g. relpos eval --seq-len {})",
                        what, f.path(), grid, which, L, grid, grid);
  }

  // The index of the channel named `label`, its range checked against the output size.
  static size_t find_label(const TokenFile& f) {
    const auto& ch = f.info().channels;
    std::string names;
    for (size_t c = 0; c < ch.size(); ++c) {
      if (ch[c].name == "label") {
        RELPOS_CHECK_CONFIG(ch[c].min >= 0 && uint64_t(ch[c].max) < f.info().vocab_size,
                            "token file '{}': channel 'label' declares the range [{}, {}]; labels index the model's "
                            "outputs, one per vocabulary entry: they must lie in [0, {})",
                            f.path(), ch[c].min, ch[c].max, f.info().vocab_size);
        return c;
      }
      names += (names.empty() ? "" : ", ") + ch[c].name;
    }
    fail_config("token file '{}' has no channel named 'label' (data.task token_labels reads it; its channels: {})",
                f.path(), names.empty() ? "none" : names);
  }

  Batch rows(const TokenFile& f, size_t label, const std::vector<size_t>& cols, uint64_t lo, uint64_t hi, int64_t L,
             Generator& g) const {
    std::vector<uint64_t> ex(static_cast<size_t>(cfg_.batch_size));
    for (uint64_t& e : ex) e = lo + g.next_u64() % (hi - lo);
    return rows_of(f, label, cols, ex, L);
  }

  // One batch row per example of `ex`.
  Batch rows_of(const TokenFile& f, size_t label, const std::vector<size_t>& cols, const std::vector<uint64_t>& ex,
                int64_t L) const {
    const int64_t B = int64_t(ex.size());
    const bool per_token = f.info().channels[label].scope == ChannelScope::Token;
    std::vector<int64_t> x(size_t(B * L), 0), y(size_t(B * L), kIgnore);
    std::vector<double> pad(size_t(B * L), 1.0);
    std::vector<uint64_t> first(static_cast<size_t>(B)), count(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
      const uint64_t e = ex[size_t(b)];
      const uint64_t s = f.example_start(e), n = std::min<uint64_t>(f.example_start(e + 1) - s, uint64_t(L));
      first[size_t(b)] = s, count[size_t(b)] = n;
      for (uint64_t t = 0; t < n; ++t) {
        const size_t at = size_t(b * L) + t;
        x[at] = int64_t(f.token(s + t));
        pad[at] = 0.0;
        if (per_token) y[at] = f.channel(label, s + t);
      }
      if (!per_token) y[size_t(b * L)] = f.channel(label, e);
    }
    Batch out{Tensor::from_vector(x, {B, L}), Tensor::from_vector(y, {B, L}), Tensor(), Tensor()};
    out.padding = Tensor::from_vector(pad, {B, L});
    out.positions = position_rows(f, cols, B, L, [&](int64_t b, int64_t t) {
      return uint64_t(t) < count[size_t(b)] ? first[size_t(b)] + uint64_t(t) : UINT64_MAX;
    });
    return out;
  }

  DataConfig cfg_;
  std::shared_ptr<TokenFile> train_, val_;
  std::vector<size_t> train_cols_, val_cols_;  // data.position_channels in each file
  size_t label_ = 0, val_label_ = 0;
  int64_t train_grid_ = 0, val_grid_ = 0;  // H x W of a grid file (row/col channels), else 0
  uint64_t train_n_ = 0, val_lo_ = 0, val_hi_ = 0;
};

bool readable_file(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), R_OK) == 0;
}

const SubwordBackend& backend() {
  const SubwordBackend* b = subword_backend();
  if (!b)
    fail_config("data.tokenizer.type sentencepiece: this relpos was built without SentencePiece (install Debian's "
                "libsentencepiece-dev, e.g. scripts/install-deps.sh, and rebuild)");
  return *b;
}

// The examples of a text: paragraphs, each ending after its run of blank lines.
std::vector<std::string> paragraphs(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t at = text.find("\n\n", start);
    if (at == std::string::npos) {
      out.push_back(text.substr(start));
      break;
    }
    size_t end = at;
    while (end < text.size() && text[end] == '\n') ++end;
    out.push_back(text.substr(start, end - start));
    start = end;
  }
  return out;
}

std::string read_bounded(const std::string& path, const std::string& what) {
  try {
    return read_whole_file(path, what, uint64_t(256) << 20);
  } catch (const Error& e) {
    fail_config("{}", e.what());
  }
}

}  // namespace

Batch Dataset::val_examples_batch(int64_t, int64_t, int64_t) const {
  fail_config("evaluation by example (--mode examples) needs a dataset of labelled examples (data.task "
              "token_labels)");
}

// data.task 'tokens' (data_tasks.cpp).
namespace {
// data.path and data.val_path (null when not given) as token files; a bad file is a config error
// (a mistake in what the config names).
std::pair<std::shared_ptr<TokenFile>, std::shared_ptr<TokenFile>> open_token_files(const DataConfig& d) {
  try {
    auto train = std::make_shared<TokenFile>(d.path, uint64_t(d.shard_vocab), "data.path");
    std::shared_ptr<TokenFile> val;
    if (!d.val_path.empty()) val = std::make_shared<TokenFile>(d.val_path, uint64_t(d.shard_vocab), "data.val_path");
    return {train, val};
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    fail_config("{}", e.what());
  }
}
}  // namespace

namespace {
// The position encoding's own checks of the channels it reads (PositionFacts::check_channels, e.g.
// ast: parents that form a tree), on every token file the run opens, with whatever token-scope
// channels the file holds. Host loop over the file's channels, once when the dataset is made.
void check_encoding_channels(const Config& cfg, const std::shared_ptr<TokenFile>& f) {
  if (!f || cfg.data.position_channels.empty()) return;
  const auto& check = nn::find_position_variant(cfg.model.position).facts.check_channels;
  if (!check) return;
  const TokenFileInfo& in = f->info();
  std::vector<uint64_t> starts;
  for (uint64_t e = 0; e <= in.n_examples; ++e) starts.push_back(f->example_start(e));
  std::map<std::string, std::vector<int32_t>> ch;
  for (size_t c = 0; c < in.channels.size(); ++c) {
    if (in.channels[c].scope != ChannelScope::Token) continue;
    std::vector<int32_t>& v = ch[in.channels[c].name];
    v.resize(size_t(in.n_tokens));
    for (uint64_t i = 0; i < in.n_tokens; ++i) v[size_t(i)] = int32_t(f->channel(c, i));
  }
  check(f->path(), starts, ch);
}
}  // namespace

std::unique_ptr<Dataset> make_token_dataset(const Config& cfg, const DataContext& ctx) {
  const DataConfig& d = cfg.data;
  if (!readable_file(d.path) && ctx.vocab_size > 0)  // a checkpoint away from its data: sampling only
    return std::make_unique<TokenDataset>(cfg, nullptr, nullptr, ctx.vocab_size, ctx.vocab);
  const auto [train, val] = open_token_files(d);
  check_encoding_channels(cfg, train);
  check_encoding_channels(cfg, val);
  const int64_t v = int64_t(train->info().vocab_size);
  RELPOS_CHECK(ctx.vocab_size == 0 || ctx.vocab_size == v,
               "data.path '{}' has vocabulary size {}, the checkpoint's model has {}", d.path, v, ctx.vocab_size);
  return std::make_unique<TokenDataset>(cfg, train, val, v, train->info().vocab);
}

// data.task 'token_labels' (data_tasks.cpp).
std::unique_ptr<Dataset> make_token_label_dataset(const Config& cfg, const DataContext&) {
  const DataConfig& d = cfg.data;
  const auto [train, val] = open_token_files(d);
  check_encoding_channels(cfg, train);
  check_encoding_channels(cfg, val);
  return std::make_unique<TokenLabelDataset>(cfg, train, val);
}

namespace {

// A subword run's text: its examples (blank-line separated paragraphs) and how many of the last
// ones are validation examples. Absent (have_text false) when data.path cannot be read (a
// checkpoint sampled elsewhere).
struct SubwordText {
  bool have_text = false;
  std::string text;
  std::vector<std::string> examples;
  uint64_t n_val = 0;
};

SubwordText read_subword_text(const DataConfig& d) {
  SubwordText t;
  t.have_text = readable_file(d.path);
  if (t.have_text) {
    t.text = read_text_file(d.path);
    (void)utf8_char_views(t.text, fmt::format("data file '{}'", d.path));
    t.examples = paragraphs(t.text);
    RELPOS_CHECK_CONFIG(t.examples.size() >= 2,
                        "data file '{}' has {} paragraph: a subword run splits by paragraph (blank-line separated "
                        "examples) and needs at least 2",
                        d.path, t.examples.size());
  }
  t.n_val = t.examples.empty()
                ? 0
                : std::clamp<uint64_t>(uint64_t(double(t.examples.size()) * d.val_fraction), 1, t.examples.size() - 1);
  return t;
}

// The tokenizer model's bytes: the checkpoint's, a given file, or trained on the training
// examples (options: the training options, set only then; source: where the bytes came from).
std::string subword_model_bytes(const DataConfig& d, const DataContext& ctx, const SubwordBackend& sp,
                                const SubwordText& t, std::string& options, std::string& source) {
  std::string model_bytes = ctx.tokenizer_model;
  source = "the checkpoint's tokenizer";
  if (model_bytes.empty() && !d.tokenizer.model.empty()) {
    // A regular file only: a FIFO or device would block or never end.
    RELPOS_CHECK_CONFIG(readable_file(d.tokenizer.model), "data.tokenizer.model '{}' is not a readable regular file",
                        d.tokenizer.model);
    model_bytes = read_bounded(d.tokenizer.model, "data.tokenizer.model");
    source = fmt::format("data.tokenizer.model '{}'", d.tokenizer.model);
    RELPOS_CHECK_CONFIG(!model_bytes.empty(), "{} is empty: not a SentencePiece model", source);
  }
  if (!model_bytes.empty()) return model_bytes;
  RELPOS_CHECK_CONFIG(t.have_text, "data.path '{}' is not readable: a subword tokenizer trains on it", d.path);
  size_t longest = 0;  // bytes of the longest sentence (a newline becomes 3 bytes)
  std::vector<std::string> sentences;
  for (size_t i = 0; i + t.n_val < t.examples.size(); ++i) {
    sentences.push_back(replace_all(t.examples[i], "\n", kNewline));
    longest = std::max(longest, sentences.back().size());
  }
  source = "the trained tokenizer";
  return sp.train(sentences, d.tokenizer,
                  {"user_defined_symbols=" + kNewline, fmt::format("max_sentence_length={}", longest + 16)}, &options);
}

std::shared_ptr<SubwordModel> load_subword_model(const SubwordBackend& sp, const std::string& bytes,
                                                 const std::string& source) {
  try {
    return sp.load(bytes, source);
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    fail_config("{}", e.what());
  }
}

// Whether the run's token cache matches: the same text, model and split (key: the cache key for
// this text; without the text, the saved key's model and split lines must match).
bool subword_cache_ok(const std::string& cache, const std::string& key_file, const std::string& key, bool have_text,
                      uint32_t model_crc, double val_fraction) {
  std::string saved_key;
  if (readable_file(key_file)) saved_key = read_bounded(key_file, "subword cache key");
  const std::string model_line = fmt::format("model {:08x}\nval_fraction {}\n", model_crc, val_fraction);
  return readable_file(cache) && !saved_key.empty() &&
         (have_text ? saved_key == key
                    : saved_key.size() >= model_line.size() &&
                          saved_key.compare(saved_key.size() - model_line.size(), model_line.size(), model_line) == 0);
}

// Every example encoded (newlines as kNewline), empty ones dropped, written as a token file.
void write_subword_cache(const std::string& cache, const SubwordModel& model, const std::vector<std::string>& examples,
                         const std::vector<std::string>& pieces) {
  std::vector<int64_t> ids;
  std::vector<uint64_t> starts;
  for (const std::string& ex : examples) {
    std::vector<int64_t> e = model.encode(replace_all(ex, "\n", kNewline));
    if (e.empty()) continue;
    starts.push_back(ids.size());
    ids.insert(ids.end(), e.begin(), e.end());
  }
  write_token_file(cache, pieces.size(), ids, starts, pieces);
}

// The tokenizer line a run reports: the library, and the options it was trained with (saved in
// the run's data/ folder when trained, read back from there otherwise).
std::string subword_info(const SubwordBackend& sp, const std::string& options, const std::string& dir, bool scratch) {
  std::string info = sp.library + (options.empty() ? "" : ", trained with " + options);
  if (!options.empty() && !scratch) replace_file_atomically(dir + "/tokenizer.options", info + "\n");
  if (options.empty() && !scratch && readable_file(dir + "/tokenizer.options")) {
    info = read_bounded(dir + "/tokenizer.options", "tokenizer options");
    while (!info.empty() && info.back() == '\n') info.pop_back();
  }
  return info;
}

}  // namespace

// data.task 'text' with data.tokenizer.type sentencepiece (text_data.cpp).
std::unique_ptr<Dataset> make_subword_dataset(const Config& cfg, const DataContext& ctx) {
  const DataConfig& d = cfg.data;
  const SubwordBackend& sp = backend();
  // The cache: <run>/data/ (a scratch directory, removed once the file is mapped, without a run).
  const bool scratch = ctx.run_dir.empty();
  const std::string dir = scratch ? (fs::temp_directory_path() / fmt::format("relpos-subword-{}", ::getpid())).string()
                                  : (fs::path(ctx.run_dir) / "data").string();
  fs::create_directories(dir);
  struct Cleanup {
    std::string dir;
    bool on;
    ~Cleanup() {
      std::error_code ec;
      if (on) fs::remove_all(dir, ec);
    }
  } cleanup{dir, scratch};
  const std::string cache = dir + "/tokens.rptok", key_file = dir + "/tokens.key", model_file = dir + "/tokenizer.model";

  const SubwordText t = read_subword_text(d);
  std::string options, source;
  const std::string model_bytes = subword_model_bytes(d, ctx, sp, t, options, source);
  const std::shared_ptr<SubwordModel> model = load_subword_model(sp, model_bytes, source);
  const std::vector<std::string> pieces = model->pieces();
  const uint32_t model_crc = crc32_update(0, model_bytes.data(), model_bytes.size());
  if (!scratch && (!options.empty() || !readable_file(model_file))) replace_file_atomically(model_file, model_bytes);

  // The cache key: the text, the model and the split.
  const std::string key = t.have_text
                              ? fmt::format("relpos subword cache 1\ntext {:08x} {}\nmodel {:08x}\nval_fraction {}\n",
                                            crc32_update(0, t.text.data(), t.text.size()), t.text.size(), model_crc,
                                            d.val_fraction)
                              : "";
  const bool cache_ok = subword_cache_ok(cache, key_file, key, t.have_text, model_crc, d.val_fraction);
  const std::string info = subword_info(sp, options, dir, scratch);
  if (!cache_ok && !t.have_text)  // neither the text nor the run's cache: the tokenizer alone (sampling)
    return std::make_unique<TokenDataset>(cfg, nullptr, nullptr, int64_t(pieces.size()), pieces, model, info);
  if (!cache_ok) {
    write_subword_cache(cache, *model, t.examples, pieces);
    replace_file_atomically(key_file, key);
  }
  std::shared_ptr<TokenFile> file;
  try {
    file = std::make_shared<TokenFile>(cache, 0, "subword token cache");
  } catch (const Error& e) {
    fail_config("{}", e.what());
  }
  RELPOS_CHECK_CONFIG(file->info().vocab_size == pieces.size(),
                      "subword token cache '{}' has vocabulary size {}, the tokenizer has {} pieces", cache,
                      file->info().vocab_size, pieces.size());
  return std::make_unique<TokenDataset>(cfg, file, nullptr, int64_t(pieces.size()), pieces, model, info);
}

int64_t data_vocab_size(const Config& cfg) {
  const DataTask& t = find_data_task(cfg.data.task);
  if (t.val_file) return make_dataset(cfg)->vocab_size();  // maps the files: the split and channels checked too
  if (t.tokenizer && cfg.data.tokenizer.type == TokenizerType::SentencePiece) {
    (void)backend();
    RELPOS_CHECK_CONFIG(cfg.data.tokenizer.model.empty() || readable_file(cfg.data.tokenizer.model),
                        "data.tokenizer.model '{}' is not a readable regular file", cfg.data.tokenizer.model);
    RELPOS_CHECK_CONFIG(readable_file(cfg.data.path), "data.path '{}' is not a readable file", cfg.data.path);
    return cfg.data.tokenizer.vocab_size;
  }
  if (t.text) {
    const std::string bytes = read_text_file(cfg.data.path);
    return int64_t(distinct_chars(utf8_char_views(bytes, fmt::format("data file '{}'", cfg.data.path))).size());
  }
  return cfg.model.vocab;
}

}  // namespace relpos::train
