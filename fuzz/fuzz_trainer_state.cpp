// fuzz/fuzz_trainer_state.cpp — trainer_state.json of a checkpoint: JSON parsing as
// load_checkpoint_state does it, field validation (parse_state) and the saved config
// (saved_config). Must succeed or throw relpos::Error.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "trainers/trainer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);  // load_checkpoint_state maps this exception to relpos::Error
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  try {
    relpos::train::SavedState st = relpos::train::parse_state(j, "fuzz/step_00000001");
    (void)relpos::train::saved_config(st, "fuzz/step_00000001");
  } catch (const relpos::Error&) {
  }
  return 0;
}
