// core/allocator.h — the CPU caching allocator. Training allocates the same shapes every
// step; reusing freed blocks (bucketed by rounded size) avoids the page faults and zeroing
// of fresh memory. Blocks are 64-byte aligned. Sanitizer builds bypass the cache so
// use-after-free stays detectable.
// Blocks of 2 MiB and more (a step's activations, gradients and saved tensors) are whole 2 MiB
// pages, 2 MiB-aligned and advised MADV_HUGEPAGE: with the kernel's transparent huge pages in
// "madvise" mode (Debian's default) they are backed by huge pages, so a GEMM or an elementwise
// pass over them takes a TLB entry per 2 MiB instead of per 4 KiB (bench/RESULTS.md: -2.4% per
// step on the small model at 1 thread). RELPOS_THP=0 switches this off (4 KiB-rounded blocks);
// anything but 0 or 1 is an error naming the variable.
#pragma once
#include <cstddef>
#include <string>

namespace relpos::cpu_allocator {

void* allocate(size_t nbytes);             // uninitialised, 64-byte aligned (2 MiB from 2 MiB up, above)
void release(void* p, size_t nbytes);      // nbytes as passed to allocate
void empty_cache();                        // free every cached block
size_t cached_bytes();
size_t block_bytes(size_t nbytes);  // the size of the block allocate(nbytes) hands out
bool huge_pages();                  // 2 MiB blocks advised MADV_HUGEPAGE (RELPOS_THP, above)
std::string describe();             // one line for relpos info: the above and the kernel's THP mode

}  // namespace relpos::cpu_allocator
