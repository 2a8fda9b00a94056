// nn/positional/deberta_bucket.h — the DeBERTa-v2 log-bucket function (see deberta.cpp),
// exposed for tests.
#pragma once
#include <cstdint>

namespace relpos::nn {
// rel = query position - key position (DeBERTa's sign). bucket_size <= 0: no bucketing.
// HF make_log_bucket_position: no pre-clamp to +-(max_position - 1) (the original code clamps).
int64_t deberta_log_bucket(int64_t rel, int64_t bucket_size = 256, int64_t max_position = 512);
}  // namespace relpos::nn
