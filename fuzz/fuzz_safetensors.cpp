// fuzz/fuzz_safetensors.cpp — the safetensors reader on arbitrary files, plain and with the
// checkpoint expectations (finite values, a data-size bound). Must return tensors or throw
// relpos::Error; what it returns must serialise back to a file it reads identically.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz_common.h"
#include "trainers/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = relpos::fuzz::scratch_path("st.safetensors");
  relpos::fuzz::write_file(path, data, size);
  relpos::SafetensorsExpect strict;
  strict.require_finite = true;
  strict.max_data_bytes = 1 << 16;
  try {
    (void)relpos::read_safetensors(path, nullptr, strict);
  } catch (const relpos::Error&) {
  }
  try {
    std::map<std::string, std::string> md;
    relpos::NamedTensors t = relpos::read_safetensors(path, &md);
    std::string bytes = relpos::serialize_safetensors(t, md);
    relpos::fuzz::write_file(path, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    relpos::NamedTensors back = relpos::read_safetensors(path);
    if (back.size() != t.size()) __builtin_trap();
    for (size_t i = 0; i < t.size(); ++i)
      if (back[i].first != t[i].first || back[i].second.shape() != t[i].second.shape()) __builtin_trap();
  } catch (const relpos::Error&) {
  }
  return 0;
}
