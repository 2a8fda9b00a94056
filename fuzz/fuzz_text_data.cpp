// fuzz/fuzz_text_data.cpp — the text data reader: a data file of arbitrary bytes through
// make_dataset (read, UTF-8, vocabulary, split), then a training and a validation batch.
// The first input byte picks seq_len (1..16) and val_fraction; must succeed or throw
// relpos::Error. Also checks that utf8_chars accepts exactly what utf8_error_offset does.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz_common.h"
#include "trainers/data/data.h"
#include "trainers/io/file_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string path = relpos::fuzz::scratch_path("data.txt");
  relpos::fuzz::write_file(path, data + 1, size - 1);
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  bool ok = true;
  try {
    (void)relpos::train::utf8_chars(text, "fuzz");
  } catch (const relpos::Error&) {
    ok = false;
  }
  if (ok != (relpos::utf8_error_offset(text) == std::string::npos)) __builtin_trap();
  relpos::train::Config cfg;
  cfg.data.task = "text";
  cfg.data.path = path;
  cfg.data.seq_len = 1 + data[0] % 16;
  cfg.data.batch_size = 2;
  cfg.data.val_fraction = (data[0] & 0x80) ? 0.5 : 0.1;
  try {
    auto ds = relpos::train::make_dataset(cfg);
    relpos::Generator g(data[0]);
    relpos::train::Batch b = ds->train_batch(g);
    relpos::train::Batch v = ds->val_batch(0, cfg.data.seq_len);
    if (b.input.numel() != 2 * cfg.data.seq_len || v.input.numel() != 2 * cfg.data.seq_len) __builtin_trap();
    if (ds->decode(ds->encode(ds->decode({0}))) != ds->decode({0})) __builtin_trap();
  } catch (const relpos::Error&) {
  }
  return 0;
}
