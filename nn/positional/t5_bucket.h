// nn/positional/t5_bucket.h — the T5 bucket function (see t5.cpp), exposed for tests and
// `relpos bias`.
#pragma once
#include <cstdint>

namespace relpos::nn {
// rel = key position - query position
int64_t t5_bucket(int64_t rel, bool bidirectional, int64_t num_buckets = 32, int64_t max_distance = 128);
}  // namespace relpos::nn
