// nn/positional/rope_freqs.h — RoPE frequency computation (rope.cpp), exposed for tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace relpos::nn {

struct RopeSettings {
  double base = 10000.0;
  int64_t rot_dim = 0;              // rotated channels (even)
  std::string style = "half";       // half | interleaved
  std::string scaling = "none";     // none | linear | ntk | yarn
  double factor = 1.0;
  int64_t original_max_len = 2048;  // YaRN's L0
  double beta_fast = 32.0, beta_slow = 1.0;
};

struct RopeFrequencies {
  std::vector<double> inv_freq;  // [rot_dim / 2]
  double mscale = 1.0;           // multiplies cos and sin (YaRN attention factor)
};

RopeFrequencies rope_frequencies(const RopeSettings& s);

}  // namespace relpos::nn
