// core/allocator.h — the CPU caching allocator. Training allocates the same shapes every
// step; reusing freed blocks (bucketed by rounded size) avoids the page faults and zeroing
// of fresh memory. Blocks are 64-byte aligned. Sanitizer builds bypass the cache so
// use-after-free stays detectable.
#pragma once
#include <cstddef>

namespace relpos::cpu_allocator {

void* allocate(size_t nbytes);             // uninitialised, 64-byte aligned
void release(void* p, size_t nbytes);      // nbytes as passed to allocate
void empty_cache();                        // free every cached block
size_t cached_bytes();

}  // namespace relpos::cpu_allocator
