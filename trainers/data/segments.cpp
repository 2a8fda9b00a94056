// trainers/data/segments.cpp — see segments.h. The host builds int64 token batches from the
// stream (as every text dataset does); no model tensor is touched here.
#include "trainers/data/segments.h"

#include "core/error.h"

namespace relpos::train {

SegmentStream::SegmentStream(std::vector<int64_t> ids, int64_t B, int64_t L, bool contiguous_rows)
    : ids_(std::move(ids)), B_(B), L_(L), contiguous_(contiguous_rows) {
  RELPOS_CHECK(B >= 1 && L >= 1, "segments: need B >= 1 and L >= 1, got {} and {}", B, L);
  RELPOS_CHECK(int64_t(ids_.size()) >= (contiguous_ ? B * (L + 1) : L + 2),
               "segments: a stream of {} tokens is too short for {} rows of segments of {}", ids_.size(), B, L);
  chunk_ = int64_t(ids_.size()) / B_;
}

int64_t SegmentStream::batches_left() const {
  if (!contiguous_) return -1;
  const int64_t used = pos_.empty() ? 0 : pos_[0];
  return (chunk_ - 1 - used) / L_;
}

Batch SegmentStream::next(Generator& gen, bool* fresh) {
  const int64_t n = int64_t(ids_.size());
  bool restart = pos_.empty();
  for (int64_t b = 0; !restart && b < B_; ++b) {
    const int64_t end = contiguous_ ? (b + 1) * chunk_ : n;
    restart = pos_[size_t(b)] + L_ + 1 > end;
  }
  if (restart) {
    RELPOS_CHECK(!contiguous_ || pos_.empty(), "segments: the evaluation stream is exhausted");
    pos_.resize(size_t(B_));
    for (int64_t b = 0; b < B_; ++b)
      pos_[size_t(b)] = contiguous_ ? b * chunk_ : int64_t(gen.next_u64() % uint64_t(n - L_ - 1));
  }
  if (fresh) *fresh = restart;
  std::vector<int64_t> x(size_t(B_ * L_)), y(size_t(B_ * L_));
  for (int64_t b = 0; b < B_; ++b) {
    const int64_t s = pos_[size_t(b)];
    for (int64_t t = 0; t < L_; ++t) {
      x[size_t(b * L_ + t)] = ids_[size_t(s + t)];
      y[size_t(b * L_ + t)] = ids_[size_t(s + t + 1)];
    }
    pos_[size_t(b)] = s + L_;
  }
  Batch out;
  out.input = Tensor::from_vector(x, {B_, L_});
  out.target = Tensor::from_vector(y, {B_, L_});
  return out;
}

}  // namespace relpos::train
