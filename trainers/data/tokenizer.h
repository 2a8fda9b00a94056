// trainers/data/tokenizer.h — subword tokenizers behind a small interface, so the trainers library
// does not link SentencePiece itself: the library that does (relpos_sentencepiece,
// trainers/data/sentencepiece.cpp, built when Debian's libsentencepiece-dev is found) registers
// its backend at program start (cli/main.cpp, tests/main.cpp). A build without it refuses
// data.tokenizer.type sentencepiece with a message saying how to get it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainers/config.h"

namespace relpos::train {

// A loaded subword model.
class SubwordModel {
 public:
  virtual ~SubwordModel() = default;
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual std::vector<std::string> pieces() const = 0;  // id -> piece
  virtual std::string serialized() const = 0;           // the .model file's bytes
};

struct SubwordBackend {
  std::string library;  // "sentencepiece 0.1.97"
  // Trains a model on `sentences` (SentencePiece's unit: one line each) with the options of `cfg`
  // and the extra trainer flags `extra` ("key=value"); returns the .model bytes. `options`
  // receives the option list as recorded with the run. ConfigError when the library refuses the
  // options (a vocabulary too large for the text, ...).
  std::string (*train)(const std::vector<std::string>& sentences, const TokenizerConfig& cfg,
                       const std::vector<std::string>& extra, std::string* options) = nullptr;
  // Loads a model from its bytes; an Error naming `source` when they are not a model.
  std::unique_ptr<SubwordModel> (*load)(const std::string& bytes, const std::string& source) = nullptr;
};

void register_subword_backend(const SubwordBackend* backend);
// The registered backend, or null (a build without SentencePiece).
const SubwordBackend* subword_backend();

}  // namespace relpos::train
