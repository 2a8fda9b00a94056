// trainers/data/sentencepiece/sentencepiece.cpp — SentencePiece (Kudo & Richardson 2018) through
// Debian's libsentencepiece-dev C++ API: SentencePieceTrainer::Train for training,
// SentencePieceProcessor::LoadFromSerializedProto / Encode / Decode for use.
#include "trainers/data/sentencepiece/sentencepiece.h"

#include <fmt/format.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <mutex>
#include <unordered_map>

#include "core/error.h"
#include "trainers/data/tokenizer.h"

#ifndef RELPOS_SENTENCEPIECE_VERSION
#define RELPOS_SENTENCEPIECE_VERSION "unknown"
#endif

namespace relpos::train {

namespace {

class SentencePieceModel : public SubwordModel {
 public:
  SentencePieceModel(const std::string& bytes, const std::string& source) : bytes_(bytes) {
    const auto st = sp_.LoadFromSerializedProto(bytes);
    if (!st.ok()) fail("{}: not a SentencePiece model ({})", source, st.ToString());
    if (sp_.GetPieceSize() < 2) fail("{}: a SentencePiece model with {} pieces", source, sp_.GetPieceSize());
  }
  std::vector<int64_t> encode(const std::string& text) const override {
    std::vector<int> ids;
    const auto st = sp_.Encode(text, &ids);
    if (!st.ok()) fail("SentencePiece could not encode the text: {}", st.ToString());
    return {ids.begin(), ids.end()};
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::vector<int> v;
    for (int64_t i : ids) v.push_back(i >= 0 && i < sp_.GetPieceSize() ? int(i) : sp_.unk_id());
    std::string out;
    const auto st = sp_.Decode(v, &out);
    if (!st.ok()) fail("SentencePiece could not decode: {}", st.ToString());
    return out;
  }
  std::vector<std::string> pieces() const override {
    std::vector<std::string> out;
    for (int i = 0; i < sp_.GetPieceSize(); ++i) out.push_back(sp_.IdToPiece(i));
    return out;
  }
  std::string serialized() const override { return bytes_; }

 private:
  sentencepiece::SentencePieceProcessor sp_;
  std::string bytes_;
};

// The sentences of a training text, handed to the trainer from memory (no input file: the
// model's recorded trainer spec then names no path, and two runs train the same bytes).
class Sentences : public sentencepiece::SentenceIterator {
 public:
  explicit Sentences(const std::vector<std::string>& s) : s_(s) {}
  bool done() const override { return i_ >= s_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return s_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& s_;
  size_t i_ = 0;
};

std::string train(const std::vector<std::string>& sentences, const TokenizerConfig& cfg,
                  const std::vector<std::string>& extra, std::string* options) {
  std::vector<std::pair<std::string, std::string>> kv = {
      {"vocab_size", std::to_string(cfg.vocab_size)},
      {"model_type", cfg.model_type == SubwordModelType::Bpe ? "bpe" : "unigram"},
      // Deterministic: one thread, every sentence, in file order, a fixed seed (below).
      {"num_threads", "1"},
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"character_coverage", "1.0"},
      // The text as it is: no NFKC, no collapsing of spaces.
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"minloglevel", "2"},
  };
  for (const std::string& e : extra) {
    const auto eq = e.find('=');
    kv.emplace_back(e.substr(0, eq), eq == std::string::npos ? "" : e.substr(eq + 1));
  }
  std::unordered_map<std::string, std::string> args;
  std::string shown;
  for (const auto& [k, v] : kv) {
    args[k] = v;
    shown += fmt::format("{}--{}={}", shown.empty() ? "" : " ", k, v);
  }
  if (options) *options = shown + " (random seed 1)";
  std::string model;
  static std::mutex mu;  // the seed is process-wide
  std::lock_guard<std::mutex> lock(mu);
  sentencepiece::SetRandomGeneratorSeed(1);
  Sentences it(sentences);
  const auto st = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
  if (!st.ok())
    fail_config("data.tokenizer: SentencePiece training failed ({}); with vocab_size {} (data.tokenizer.vocab_size)",
                st.ToString(), cfg.vocab_size);
  return model;
}

std::unique_ptr<SubwordModel> load(const std::string& bytes, const std::string& source) {
  return std::make_unique<SentencePieceModel>(bytes, source);
}

const SubwordBackend kBackend{std::string("sentencepiece ") + RELPOS_SENTENCEPIECE_VERSION, train, load};

}  // namespace

void register_sentencepiece() { register_subword_backend(&kBackend); }

}  // namespace relpos::train
