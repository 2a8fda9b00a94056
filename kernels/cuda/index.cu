// kernels/cuda/index.cu — embedding, index_select, gather and the deterministic
// scatter-adds, with index bounds checked on the device (launch.h: Check). No float
// atomics and no host-built sort: each contribution gets a key (its output segment), a
// stable CUB radix sort groups the contributions of every segment in increasing position
// (the CPU's loop order), a binary search finds each segment's start, and segment_sum gives
// each output element one thread that adds its list in order, in T, from 0 — the same
// additions in the same order as kernels/cpu/index.cpp.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/common.cuh"

namespace relpos::k::cuda::dev {

namespace {

// Element e (row-major) of an index of geometry ig: its offset in the index (strides is), the
// offset of its coordinates but dim in the indexed tensor (strides ts) and ts's stride at dim.
struct IndexedOffsets {
  int64_t idx, rest, dim_stride;
};
__device__ inline IndexedOffsets indexed_offsets(int64_t e, const Geom& ig, const Strides& is, const Strides& ts,
                                                 int dim) {
  IndexedOffsets o{0, 0, 0};
  for (int d = ig.ndim - 1; d >= 0; --d) {
    const int64_t c = e % ig.shape[d];
    e /= ig.shape[d];
    o.idx += c * is.s[d];
    if (d == dim)
      o.dim_stride = ts.s[d];
    else
      o.rest += c * ts.s[d];
  }
  return o;
}

template <typename T>
__global__ void embedding_kernel(T* out, const T* w, const int64_t* ids, int64_t n, int64_t V, int64_t D, Check chk) {
  RELPOS_GRID_STRIDE(e, n * D) {
    const int64_t i = e / D, r = ids[i];
    if (r < 0 || r >= V) {
      if (e % D == 0) record_failure(chk, i);
      out[e] = T(0);
      continue;
    }
    out[e] = w[r * D + e % D];
  }
}

// x [pre, nsrc, post] -> out [pre, m, post]
template <typename T>
__global__ void index_select_kernel(T* out, const T* x, const int64_t* ids, int64_t pre, int64_t nsrc, int64_t m,
                                    int64_t post, Check chk) {
  RELPOS_GRID_STRIDE(e, pre * m * post) {
    const int64_t q = e % post, j = (e / post) % m, p = e / (post * m);
    const int64_t r = ids[j];
    if (r < 0 || r >= nsrc) {
      record_failure(chk, j);
      out[e] = T(0);
      continue;
    }
    out[e] = x[(p * nsrc + r) * post + q];
  }
}

template <typename T>
__global__ void gather_kernel(T* out, const T* x, Strides xs, const int64_t* idx, Strides is, Geom ig, int dim,
                              int64_t bound, int64_t n, Check chk) {
  RELPOS_GRID_STRIDE(e, n) {
    const IndexedOffsets o = indexed_offsets(e, ig, is, xs, dim);
    const int64_t v = idx[o.idx];
    if (v < 0 || v >= bound) {
      record_failure(chk, e);
      out[e] = T(0);
      continue;
    }
    out[e] = x[o.rest + v * o.dim_stride];
  }
}

__global__ void keys_from_ids_kernel(const int64_t* ids, int64_t n, int64_t nseg, unsigned long long* key, int64_t* val,
                                     Check chk) {
  RELPOS_GRID_STRIDE(e, n) {
    const int64_t r = ids[e];
    const bool ok = r >= 0 && r < nseg;
    if (!ok) record_failure(chk, e);
    key[e] = static_cast<unsigned long long>(ok ? r : nseg);
    val[e] = e;
  }
}

__global__ void keys_scatter_kernel(const int64_t* idx, Strides is, Geom ig, int dim, int64_t bound, Strides os,
                                    int64_t nseg, int64_t n, unsigned long long* key, int64_t* val, Check chk) {
  RELPOS_GRID_STRIDE(e, n) {
    const IndexedOffsets o = indexed_offsets(e, ig, is, os, dim);
    const int64_t v = idx[o.idx];
    const bool ok = v >= 0 && v < bound;
    if (!ok) record_failure(chk, e);
    key[e] = static_cast<unsigned long long>(ok ? o.rest + v * o.dim_stride : nseg);
    val[e] = e;
  }
}

// seg_begin[s] = lower_bound(sorted_key, s) for s in [0, nseg].
__global__ void segment_bounds_kernel(int64_t* seg_begin, const unsigned long long* sorted_key, int64_t n,
                                      int64_t nseg) {
  RELPOS_GRID_STRIDE(s, nseg + 1) {
    int64_t lo = 0, hi = n;
    const auto want = static_cast<unsigned long long>(s);
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (sorted_key[mid] < want)
        lo = mid + 1;
      else
        hi = mid;
    }
    seg_begin[s] = lo;
  }
}

template <typename T>
__global__ void segment_sum_kernel(T* out, const T* src, const int64_t* seg_begin, const int64_t* perm, int64_t pre,
                                   int64_t nseg, int64_t post, int64_t src_m) {
  RELPOS_GRID_STRIDE(e, pre * nseg * post) {
    const int64_t q = e % post, s = (e / post) % nseg, p = e / (post * nseg);
    T acc = T(0);
    for (int64_t k = seg_begin[s]; k < seg_begin[s + 1]; ++k) acc += src[(p * src_m + perm[k]) * post + q];
    out[e] = acc;
  }
}

}  // namespace

void embedding(DT t, void* out, const void* w, const int64_t* ids, int64_t n, int64_t V, int64_t D, Check chk) {
  if (n * D == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    embedding_kernel<T>
        <<<grid_for(n * D), kThreads>>>(static_cast<T*>(out), static_cast<const T*>(w), ids, n, V, D, chk);
  });
  RELPOS_LAUNCH_CHECK("embedding");
}

void index_select(DT t, void* out, const void* x, const int64_t* ids, int64_t pre, int64_t nsrc, int64_t m,
                  int64_t post, Check chk) {
  const int64_t n = pre * m * post;
  if (n == 0) return;
  visit_all(t, [&](auto tag) {  // int64 too, as the CPU's copy-based index_select
    using T = decltype(tag);
    index_select_kernel<T>
        <<<grid_for(n), kThreads>>>(static_cast<T*>(out), static_cast<const T*>(x), ids, pre, nsrc, m, post, chk);
  });
  RELPOS_LAUNCH_CHECK("index_select");
}

void gather(DT t, void* out, const void* x, const Strides& xs, const int64_t* idx, const Strides& is, const Geom& ig,
            int dim, int64_t bound, Check chk) {
  const int64_t n = numel(ig);
  if (n == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    gather_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(out), static_cast<const T*>(x), xs, idx, is, ig, dim,
                                                bound, n, chk);
  });
  RELPOS_LAUNCH_CHECK("gather");
}

void keys_from_ids(const int64_t* ids, int64_t n, int64_t nseg, unsigned long long* key, int64_t* val, Check chk) {
  if (n == 0) return;
  keys_from_ids_kernel<<<grid_for(n), kThreads>>>(ids, n, nseg, key, val, chk);
  RELPOS_LAUNCH_CHECK("scatter-add keys");
}

void keys_scatter(const int64_t* idx, const Strides& is, const Geom& ig, int dim, int64_t bound, const Strides& os,
                  int64_t nseg, unsigned long long* key, int64_t* val, Check chk) {
  const int64_t n = numel(ig);
  if (n == 0) return;
  keys_scatter_kernel<<<grid_for(n), kThreads>>>(idx, is, ig, dim, bound, os, nseg, n, key, val, chk);
  RELPOS_LAUNCH_CHECK("scatter_add keys");
}

int end_bit_for(int64_t nseg) {
  int bits = 1;
  while (bits < 63 && (int64_t(1) << bits) <= nseg) ++bits;
  return bits;
}

size_t sort_pairs_temp_bytes(int64_t n, int end_bit) {
  size_t bytes = 0;
  RELPOS_CUDA_CHECK(
      "scatter-add sort",
      cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const unsigned long long*>(nullptr),
                                      static_cast<unsigned long long*>(nullptr), static_cast<const int64_t*>(nullptr),
                                      static_cast<int64_t*>(nullptr), int(n), 0, end_bit, cudaStream_t(0)));
  return bytes;
}

void sort_pairs(void* temp, size_t temp_bytes, const unsigned long long* key_in, unsigned long long* key_out,
                const int64_t* val_in, int64_t* val_out, int64_t n, int end_bit) {
  if (n == 0) return;
  RELPOS_CUDA_CHECK("scatter-add sort", cub::DeviceRadixSort::SortPairs(temp, temp_bytes, key_in, key_out, val_in,
                                                                        val_out, int(n), 0, end_bit, cudaStream_t(0)));
  RELPOS_LAUNCH_CHECK("scatter-add sort");
}

void segment_bounds(int64_t* seg_begin, const unsigned long long* sorted_key, int64_t n, int64_t nseg) {
  segment_bounds_kernel<<<grid_for(nseg + 1), kThreads>>>(seg_begin, sorted_key, n, nseg);
  RELPOS_LAUNCH_CHECK("scatter-add segments");
}

void segment_sum(DT t, void* out, const void* src, const int64_t* seg_begin, const int64_t* perm, int64_t pre,
                 int64_t nseg, int64_t post, int64_t src_m) {
  const int64_t n = pre * nseg * post;
  if (n == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    segment_sum_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(out), static_cast<const T*>(src), seg_begin, perm,
                                                     pre, nseg, post, src_m);
  });
  RELPOS_LAUNCH_CHECK("scatter-add");
}

}  // namespace relpos::k::cuda::dev
