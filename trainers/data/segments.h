// trainers/data/segments.h — consecutive segments for Transformer-XL training and evaluation
// (model.mem_len > 0). B parallel streams walk through a token stream L tokens at a time:
// batch k holds, for every row b, tokens [s_b + kL, s_b + (k+1)L) and their next tokens, so
// the segment memory of row b (nn::SegmentMemory) always holds row b's preceding text. When a
// row would run past the end, every row starts again at fresh random offsets (drawn with the
// data generator) and `fresh` reports that the memory must be reset.
#pragma once
#include <vector>

#include "core/rng.h"
#include "trainers/data/data.h"

namespace relpos::train {

class SegmentStream {
 public:
  // ids: the token stream; B rows of L tokens per batch. contiguous_rows: split the stream into
  // B equal contiguous chunks instead of random starts (evaluation; deterministic).
  SegmentStream(std::vector<int64_t> ids, int64_t B, int64_t L, bool contiguous_rows = false);
  // Next batch [B, L] (input, target); *fresh = the streams (re)started here.
  Batch next(Generator& gen, bool* fresh);
  int64_t rows() const { return B_; }
  // Contiguous mode: batches until a row runs out.
  int64_t batches_left() const;

 private:
  std::vector<int64_t> ids_;
  int64_t B_, L_;
  bool contiguous_;
  std::vector<int64_t> pos_;  // next start per row (empty: not started)
  int64_t chunk_ = 0;
};

}  // namespace relpos::train
