// fuzz/fuzz_token_file.cpp — the token-file reader (trainers/data/token_file.h): arbitrary bytes as
// a relpos token file or an llm.c shard, opened (header against the file size, verification),
// described (`relpos data inspect`), and read through data.task tokens or token_labels (split, the
// label channel, a training and a validation batch). The first input byte picks an llm.c
// vocabulary override, seq_len, the task (bit 6) and val_fraction. Must succeed or throw relpos::Error; every token a batch holds must lie inside
// the vocabulary the dataset reports.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz_common.h"
#include "trainers/data/data.h"
#include "trainers/data/token_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string path = relpos::fuzz::scratch_path("tokens.rptok");
  relpos::fuzz::write_file(path, data + 1, size - 1);
  const uint64_t vocab = (data[0] & 1) ? 300 : 0;
  try {
    relpos::train::TokenFile f(path, vocab);
    (void)relpos::train::describe_token_file(f, 8);
  } catch (const relpos::Error&) {
  }
  relpos::train::Config cfg;
  cfg.data.task = (data[0] & 0x40) ? "token_labels" : "tokens";
  cfg.data.path = path;
  cfg.data.shard_vocab = int64_t(vocab);
  cfg.data.seq_len = 1 + (data[0] >> 1) % 8;
  if (data[0] & 0x40) cfg.model.kind = relpos::nn::ModelKind::Encoder;
  cfg.data.batch_size = 2;
  cfg.data.val_fraction = (data[0] & 0x80) ? 0.5 : 0.1;
  try {
    auto ds = relpos::train::make_dataset(cfg);
    relpos::Generator g(data[0]);
    for (const relpos::train::Batch& b : {ds->train_batch(g), ds->val_batch(0, cfg.data.seq_len)})
      for (int64_t t : b.input.to_vector<int64_t>())
        if (t < 0 || t >= ds->vocab_size()) __builtin_trap();
  } catch (const relpos::Error&) {
  }
  return 0;
}
