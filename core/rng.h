// core/rng.h — a seeded, counter-based random generator whose whole state is two
// integers (seed, offset), so it can be saved in a checkpoint and restored exactly.
// Each draw hashes (seed, offset++) with SplitMix64; normals use Box–Muller.
#pragma once
#include <cstdint>

namespace relpos {

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
  bool operator==(const GeneratorState&) const = default;
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : state_{seed, 0} {}

  uint64_t next_u64();
  double uniform();        // [0, 1)
  double normal();         // N(0, 1)
  GeneratorState state() const { return state_; }
  void set_state(GeneratorState s) { state_ = s; }
  void manual_seed(uint64_t seed) { state_ = {seed, 0}; }

 private:
  GeneratorState state_;
};

// The process-wide default generator (used when an op is not handed one).
Generator& default_generator();

}  // namespace relpos
