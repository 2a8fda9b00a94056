// kernels/cpu/scratch.h — a growable buffer that is never initialised: a kernel's per-thread
// scratch (packed GEMM operands, rounded copies, bf16 pair words) that it overwrites in full
// before reading. std::vector::resize value-initialises every element it adds: a memset of up
// to the whole buffer whenever a call needs more elements than the one before, which the bf16
// GEMMs' alternating operand sizes hit on most calls (bench/RESULTS.md: ~1.4% of a tiny bf16
// step was that memset).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <memory>

#include "core/error.h"

namespace relpos::k::cpu {

template <typename T>
class Scratch {
 public:
  // At least n elements, 64-byte aligned; the contents are undefined (lost when it grows).
  T* get(size_t n) {
    if (n > capacity_ || !data_) {
      const size_t bytes = (std::max<size_t>(n, 1) * sizeof(T) + 63) / 64 * 64;
      data_.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
      RELPOS_CHECK(data_ != nullptr, "out of memory allocating {} bytes of kernel scratch", bytes);
      capacity_ = bytes / sizeof(T);
    }
    return data_.get();
  }
  size_t capacity() const { return capacity_; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  size_t capacity_ = 0;
};

}  // namespace relpos::k::cpu
