// relpos_bench_data — how fast the data side feeds training (not a test; numbers go to the report):
//   relpos_bench_data TOKEN_FILE [SEQ_LEN] [BATCH] [SECONDS] [SP_TEXT]
// draws data.task tokens training batches (windows read from the memory-mapped file, every token
// range-checked) for SECONDS and prints tokens/s, to compare with `relpos train`'s tok/s on the
// same shapes (docs/data.md). With SP_TEXT (a text file) it also times training the SentencePiece
// model of data.tokenizer (1024 pieces, unigram and bpe) on that text's training paragraphs.
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "trainers/data/data.h"
#include "trainers/data/sentencepiece/sentencepiece.h"
#include "trainers/data/tokenizer.h"

using namespace relpos;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: relpos_bench_data TOKEN_FILE [SEQ_LEN] [BATCH] [SECONDS] [SP_TEXT]\n");
    return 2;
  }
  train::register_sentencepiece();
  try {
    train::Config cfg;
    cfg.data.task = "tokens";
    cfg.data.path = argv[1];
    cfg.data.seq_len = argc > 2 ? std::atoll(argv[2]) : 128;
    cfg.data.batch_size = argc > 3 ? std::atoll(argv[3]) : 16;
    const double secs = argc > 4 ? std::atof(argv[4]) : 2.0;
    auto ds = train::make_dataset(cfg);
    Generator g(1);
    int64_t tokens = 0;
    const auto t0 = Clock::now();
    double el = 0;
    while ((el = std::chrono::duration<double>(Clock::now() - t0).count()) < secs) {
      train::Batch b = ds->train_batch(g);
      tokens += b.input.numel();
    }
    fmt::print("token reader: {} tokens in {:.2f} s = {:.0f} tokens/s (seq_len {}, batch {})\n", tokens, el,
               double(tokens) / el, cfg.data.seq_len, cfg.data.batch_size);
    if (argc > 5) {
      const char* text = argv[5];
      for (const char* type : {"unigram", "bpe"}) {
        train::Config c;
        c.data.task = "text";
        c.data.path = text;
        c.data.tokenizer.type = train::TokenizerType::SentencePiece;
        c.data.tokenizer.vocab_size = 1024;
        c.data.tokenizer.model_type = *parse_enum<train::SubwordModelType>(type);
        const auto s0 = Clock::now();
        auto sp = train::make_dataset(c);  // train the model, encode the text, write and map the token file
        fmt::print("sentencepiece {} (1024 pieces) train + encode: {:.2f} s, {} tokens\n", type,
                   std::chrono::duration<double>(Clock::now() - s0).count(), sp->train_stream().size() + sp->val_stream().size());
      }
    }
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
