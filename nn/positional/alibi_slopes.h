// nn/positional/alibi_slopes.h — the reference ALiBi slopes for any head count (alibi.cpp).
#pragma once
#include <cstdint>
#include <vector>

namespace relpos::nn {
std::vector<double> alibi_slopes(int64_t n_heads);
}  // namespace relpos::nn
