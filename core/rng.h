// core/rng.h — a seeded, counter-based random generator whose whole state is two
// integers (seed, offset), so it can be saved in a checkpoint and restored exactly.
// Each draw hashes (seed, offset++) with SplitMix64; normals use Box–Muller.
#pragma once
#include <cstdint>

#include "core/host_device.h"

namespace relpos {

// The counter-based draw itself, usable from host and device code: draw number `counter` of
// a generator seeded with `seed`. A Generator is this function plus a running counter, so a
// kernel can produce draw offset + i for element i independently (dropout on any device).
RELPOS_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
RELPOS_HOST_DEVICE inline uint64_t rng_draw(uint64_t seed, uint64_t counter) {
  return splitmix64(splitmix64(seed ^ 0x5851F42D4C957F2DULL) + counter * 0xD1B54A32D192ED03ULL);
}
RELPOS_HOST_DEVICE inline double rng_uniform(uint64_t seed, uint64_t counter) {  // [0, 1)
  return double(rng_draw(seed, counter) >> 11) * 0x1.0p-53;
}

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
  // Reserve n draws for a kernel that computes them itself: returns the first counter.
  // Sharded (set_shard), the n draws are this rank's share of one tensor `world` times larger
  // along its leading axis: the first counter is offset + rank * n and the stream moves on by
  // world * n, so the ranks of a data-parallel run together draw exactly what one process
  // drawing the whole batch would (dropout masks included).
  uint64_t advance(uint64_t n) {
    uint64_t first = state_.offset + shard_rank_ * n;
    state_.offset += shard_world_ * n;
    return first;
  }
  // This generator feeds rank `rank` of `world` data-parallel processes (not part of the
  // saved state: a checkpoint holds the stream position of the whole batch).
  void set_shard(uint64_t rank, uint64_t world) {
    shard_rank_ = rank;
    shard_world_ = world;
  }

 private:
  GeneratorState state_;
  uint64_t shard_rank_ = 0, shard_world_ = 1;
};

// The process-wide default generator (used when an op is not handed one).
Generator& default_generator();

}  // namespace relpos
