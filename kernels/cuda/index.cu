// kernels/cuda/index.cu — embedding, index_select, gather and the deterministic
// scatter-adds. No float atomics: the host (index.cpp) sorts the contributions of every
// output element into a CSR list (stable counting sort, so each list is in the CPU's loop
// order) and segment_sum gives each output element one thread that adds its list in order,
// in T, starting from 0 — the same additions in the same order as kernels/cpu/index.cpp.
#include "kernels/cuda/common.cuh"

namespace relpos::k::cuda::dev {

namespace {

template <typename T>
__global__ void embedding_kernel(T* out, const T* w, const int64_t* ids, int64_t n, int64_t D) {
  RELPOS_GRID_STRIDE(e, n * D) out[e] = w[ids[e / D] * D + e % D];
}

// x [pre, nsrc, post] -> out [pre, m, post]
template <typename T>
__global__ void index_select_kernel(T* out, const T* x, const int64_t* ids, int64_t pre, int64_t nsrc, int64_t m,
                                    int64_t post) {
  RELPOS_GRID_STRIDE(e, pre * m * post) {
    const int64_t q = e % post, j = (e / post) % m, p = e / (post * m);
    out[e] = x[(p * nsrc + ids[j]) * post + q];
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

template <typename T>
__global__ void gather_kernel(T* out, const T* x, Strides xs, const int64_t* idx, Strides is, Geom ig, int dim,
                              int64_t n) {
  RELPOS_GRID_STRIDE(e, n) {
    int64_t rem = e, xo = 0, io = 0, v_stride = 0;
    for (int d = ig.ndim - 1; d >= 0; --d) {
      const int64_t c = rem % ig.shape[d];
      rem /= ig.shape[d];
      io += c * is.s[d];
      if (d == dim) v_stride = xs.s[d];
      else xo += c * xs.s[d];
    }
    out[e] = x[xo + idx[io] * v_stride];
  }
}

}  // namespace

void embedding(DT t, void* out, const void* w, const int64_t* ids, int64_t n, int64_t D) {
  if (n * D == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    embedding_kernel<T><<<grid_for(n * D), kThreads>>>(static_cast<T*>(out), static_cast<const T*>(w), ids, n, D);
  });
  RELPOS_LAUNCH_CHECK("embedding");
}

void index_select(DT t, void* out, const void* x, const int64_t* ids, int64_t pre, int64_t nsrc, int64_t m,
                  int64_t post) {
  const int64_t n = pre * m * post;
  if (n == 0) return;
  visit_all(t, [&](auto tag) {  // int64 too, as the CPU's copy-based index_select
    using T = decltype(tag);
    index_select_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(out), static_cast<const T*>(x), ids, pre, nsrc,
                                                      m, post);
  });
  RELPOS_LAUNCH_CHECK("index_select");
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

void gather(DT t, void* out, const void* x, const Strides& xs, const int64_t* idx, const Strides& is, const Geom& ig,
            int dim) {
  const int64_t n = numel(ig);
  if (n == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    gather_kernel<T><<<grid_for(n), kThreads>>>(static_cast<T*>(out), static_cast<const T*>(x), xs, idx, is, ig, dim, n);
  });
  RELPOS_LAUNCH_CHECK("gather");
}

}  // namespace relpos::k::cuda::dev
