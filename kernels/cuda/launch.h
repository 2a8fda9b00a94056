// kernels/cuda/launch.h — the raw-pointer seam between the CUDA backend's host side
// (kernels/cuda/*.cpp, compiled by g++: validation with the CPU's messages, shapes, output
// allocation, Tensor) and its device side (kernels/cuda/*.cu, compiled by nvcc: kernels and
// their launchers). nvcc 13's front end cannot compile fmt's consteval format strings, which
// every relpos header reaches through core/error.h, so .cu files include only this header
// (and kernels/adam_math.h through it), core/rng.h (the counter-based draw, host + device) and
// CUDA headers. Every pointer is a
// device pointer to element 0 of a tensor; strides are in elements. Launchers queue work on
// the default stream and throw relpos::Error (through throw_error) when a launch or a cuBLAS
// call fails.
#pragma once
#include <cstdint>

#include "kernels/adam_math.h"

namespace relpos::k::cuda::dev {

constexpr int kMaxDims = 8;
enum class DT : int { F32 = 0, F64 = 1, I64 = 2 };  // same order as relpos::DType (checked in common.cpp)

struct Geom {  // the logical shape every operand of an elementwise launch is indexed by
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
};
struct Strides {  // one operand's element strides over Geom (0 = broadcast)
  int64_t s[kMaxDims] = {};
};

// Throws relpos::Error("<op>: CUDA error in <what>: <status>"). Defined in common.cpp.
[[noreturn]] void throw_error(const char* op, const char* what, const char* status);
// RELPOS_CUDA_SYNC=1 (debugging): wait for the device after each launch through the counted
// relpos::cuda::synchronize() and throw pending device-check failures at once. common.cpp.
void debug_sync(const char* op);

// A device-side check (relpos::cuda::DeviceCheck, core/cuda_runtime.h): a kernel that finds
// a bad input at element pos does atomicMin(record, base | pos) and does not read through it;
// the host throws the message at its next read. record == nullptr: no check.
struct Check {
  unsigned long long* record = nullptr;
  unsigned long long base = 0;
};

// ---------------------------------------------------------------- info.cu
void cublas_version(int* major, int* minor, int* patch);  // -1 where cuBLAS cannot say

// ---------------------------------------------------------------- elementwise.cu
// op codes: the integer value of k::Unary / k::Binary (the order is checked in elementwise.cpp).
// out is contiguous over g; n = numel(g) > 0.
void unary(int op, DT t, void* out, const void* x, const Strides& xs, const Geom& g, double p, double q);
void unary_grad(int op, DT t, void* out, const void* gr, const Strides& gs, const void* x, const Strides& xs,
                const Geom& g, double p, double q);
// int64 Div records element 0 in chk on division by zero or INT64_MIN / -1.
void binary(int op, DT t, void* out, const void* a, const Strides& as, const void* b, const Strides& bs, const Geom& g,
            Check chk);
void where(DT ct, DT t, void* out, const void* c, const Strides& cs, const void* a, const Strides& as,
           const void* b, const Strides& bs, const Geom& g);
void add_inplace(DT t, void* dst, const Strides& ds, const void* src, const Strides& ss, const Geom& g,
                 double alpha);
void mul_inplace(DT t, void* dst, const Strides& ds, const Geom& g, double s);

// ---------------------------------------------------------------- masking.cu
// x, out: contiguous [rows, Lk], row r is query i = r % Lq.
void causal_fill(DT t, void* out, const void* x, int64_t rows, int64_t Lq, int64_t Lk, int64_t q_offset,
                 int64_t k_offset, double value);

// ---------------------------------------------------------------- reduce.cu
// x: contiguous [rows, R] -> out [rows]; op = int(k::Reduce). One block per row, float64
// accumulation, fixed summation tree (deterministic).
void reduce_rows(int op, DT t, void* out, const void* x, int64_t rows, int64_t R, int64_t correction);
// x: contiguous [R, K] -> out [K]: column sums (op Sum or Mean), no transposed copy. Two
// passes: thread (column, chunk of kColChunk rows) adds its rows in order into part
// ([col_chunks(R), K] float64), then one thread per column adds the chunks in order.
constexpr int64_t kColChunk = 64;
inline int64_t col_chunks(int64_t R) {
  return (R + kColChunk - 1) / kColChunk;
}
void reduce_cols(int op, DT t, void* out, const void* x, int64_t R, int64_t K, double* part);
// x: contiguous [n] -> out (one element), op Sum or Mean: one block per chunk of 8192
// elements into partial (all_chunks(n) doubles), then one block over the partials (fixed
// trees: deterministic) — a full reduction on every multiprocessor, not one block.
int64_t all_chunks(int64_t n);
void reduce_all(int op, DT t, void* out, const void* x, int64_t n, double* partial);
// x: contiguous [n] -> *out = sum x^2 in float64. partial: device scratch of
// sum_squares_chunks(n) doubles. Fixed chunking and summation tree (deterministic).
int64_t sum_squares_chunks(int64_t n);
void sum_squares(DT t, double* out, const void* x, int64_t n, double* partial);

// ---------------------------------------------------------------- matmul.cu
struct GemmOperand {  // row-major view of one [rows, cols] matrix, as kernels/cpu/matmul.cpp describes it
  const void* data;
  bool trans;            // false: row-major (ld = row stride); true: column-major (ld = column stride)
  int64_t ld;
  int64_t batch_stride;  // elements between consecutive matrices of the batch (0 = broadcast)
};
// c[i] (row-major [M, N], ldc, c_stride apart) = a[i] [M, K] @ b[i] [K, N] for i < batch.
// half = 0: a, b and c are t. half = 1 / 2: a and b are bfloat16 / float16 (2 bytes per
// element, from to_half), c is float32, float32 accumulation on the tensor cores.
void gemm(DT t, bool allow_tf32, int64_t M, int64_t N, int64_t K, const GemmOperand& a, const GemmOperand& b, void* c,
          int64_t ldc, int64_t c_stride, int64_t batch, int half = 0);
// dst[i] = src[i] as bfloat16 (half = 1) or float16 (half = 2), round to nearest even, i < n.
void to_half(int half, void* dst, const float* src, int64_t n);

// ---------------------------------------------------------------- softmax.cu
// a, b, out: contiguous [rows, n]. kind 0 softmax(a), 1 log_softmax(a),
// 2 softmax_backward(y = a, gy = b), 3 log_softmax_backward(y = a, gy = b).
void softmax_rows(int kind, DT t, void* out, const void* a, const void* b, int64_t rows, int64_t n);

// ---------------------------------------------------------------- norm.cu
// x, y, gy, dx: contiguous [rows, D]; mean, rstd: [rows]; w, b: [D] or null.
void norm_forward(DT t, bool center, const void* x, const void* w, const void* b, void* y, void* mean,
                  void* rstd, int64_t rows, int64_t D, double eps);
void norm_backward_dx(DT t, bool center, const void* gy, const void* x, const void* mean, const void* rstd,
                      const void* w, void* dx, int64_t rows, int64_t D);
// dw, db: [D] or null. Two passes, as kernels/cpu/norm.cpp: rows in fixed chunks of
// kNormRowChunk, one thread per (column, chunk) sums its chunk's rows in order into
// part_w / part_b ([norm_chunks(rows), D] float64 scratch, either null when its output is),
// then one thread per column adds the chunks in order: parallel over rows, deterministic,
// the CPU's additions in the CPU's order.
constexpr int64_t kNormRowChunk = 64;
inline int64_t norm_chunks(int64_t rows) {
  return (rows + kNormRowChunk - 1) / kNormRowChunk;
}
void norm_backward_params(DT t, bool center, const void* gy, const void* x, const void* mean, const void* rstd,
                          void* dw, void* db, int64_t rows, int64_t D, double* part_w, double* part_b);

// ---------------------------------------------------------------- index.cu
// Index bounds are checked on the device (chk; a bad index reads nothing: its output is 0).
// out [n, D] = w [V, D] rows ids[0..n) (ids contiguous).
void embedding(DT t, void* out, const void* w, const int64_t* ids, int64_t n, int64_t V, int64_t D, Check chk);
// x contiguous [pre, nsrc, post], ids [m] -> out [pre, m, post] (any dtype).
void index_select(DT t, void* out, const void* x, const int64_t* ids, int64_t pre, int64_t nsrc, int64_t m,
                  int64_t post, Check chk);
// out [idx shape] contiguous: out[e] = x[coords(e) with idx[e] at dim] (idx[e] in [0, bound)).
void gather(DT t, void* out, const void* x, const Strides& xs, const int64_t* idx, const Strides& is, const Geom& ig,
            int dim, int64_t bound, Check chk);
// The scatter-adds, deterministic and without a host-built sort:
//  1. keys: key[e] (unsigned) of every contribution e < n, in [0, nseg]; nseg for a bad index
//     (recorded in chk), so it falls in no segment; val[e] = e.
//     keys_from_ids: key[e] = ids[e] (ids contiguous [n], valid in [0, nseg)).
//     keys_scatter: e runs over idx (geometry ig, strides is) in row-major order; key[e] = the
//       offset in the contiguous output (element strides os over ig's dims) of coords(e) with
//       idx[e] at dim (valid in [0, bound)); nseg = numel of the output.
//  2. sort_pairs: a stable radix sort (CUB) of (key, val) by key's low end_bit bits, so each
//     segment's contributions stay in increasing e: the CPU's loop order.
//  3. segment_bounds: seg_begin[s] = first k with sorted_key[k] >= s, s in [0, nseg].
//  4. segment_sum: out[p, s, q] = sum_{k = seg_begin[s]}^{seg_begin[s+1]-1} src[p, perm[k], q]
//     (src [pre, src_m, post]), in T, in increasing k, one thread per output element.
void keys_from_ids(const int64_t* ids, int64_t n, int64_t nseg, unsigned long long* key, int64_t* val, Check chk);
void keys_scatter(const int64_t* idx, const Strides& is, const Geom& ig, int dim, int64_t bound, const Strides& os,
                  int64_t nseg, unsigned long long* key, int64_t* val, Check chk);
int end_bit_for(int64_t nseg);  // bits needed for keys in [0, nseg]
size_t sort_pairs_temp_bytes(int64_t n, int end_bit);
void sort_pairs(void* temp, size_t temp_bytes, const unsigned long long* key_in, unsigned long long* key_out,
                const int64_t* val_in, int64_t* val_out, int64_t n, int end_bit);
void segment_bounds(int64_t* seg_begin, const unsigned long long* sorted_key, int64_t n, int64_t nseg);
void segment_sum(DT t, void* out, const void* src, const int64_t* seg_begin, const int64_t* perm, int64_t pre,
                 int64_t nseg, int64_t post, int64_t src_m);

// ---------------------------------------------------------------- rotary.cu
// x, out contiguous [N, L, dh]; cs contiguous [2, L, half]; n = N L > 0 rows.
void rotary(DT t, void* out, const void* x, const void* cs, int64_t N, int64_t L, int64_t dh, int64_t half,
            bool interleaved, bool inverse);

// ---------------------------------------------------------------- conv.cu
// Depthwise 2D convolution, channels last (kernels/cpu/conv.cpp): x, out contiguous
// [B, H, W, C], w contiguous [C, K, K] (K odd), bias [C] or nullptr. Float64 accumulation in
// the CPU's order: the CPU's bits.
void depthwise_conv2d(DT t, void* out, const void* x, const void* w, const void* bias, int64_t B, int64_t H,
                      int64_t W, int64_t C, int64_t K);
// dx [B, H, W, C], dw [C, K, K], dbias [C] (nullptr: none) from gy and x [B, H, W, C], w.
void depthwise_conv2d_backward(DT t, void* dx, void* dw, void* dbias, const void* gy, const void* x, const void* w,
                               int64_t B, int64_t H, int64_t W, int64_t C, int64_t K);

// ---------------------------------------------------------------- toeplitz.cu
// s, out: contiguous [B, H, Lq, Lk], bias: contiguous [H, Lq + Lk - 1].
void toeplitz_add(DT t, void* out, const void* s, const void* bias, int64_t B, int64_t H, int64_t Lq, int64_t Lk);
// out [H, Lq + Lk - 1]: one thread per (h, diagonal), b then i in order, float64 accumulation.
void toeplitz_diag_sum(DT t, void* out, const void* ds, int64_t B, int64_t H, int64_t Lq, int64_t Lk);

// ---------------------------------------------------------------- random.cu
// out[i] = rng_uniform(seed, first + i) < p ? 0 : 1 / (1 - p)   (core/rng.h, as kernels/cpu/random.cpp)
void dropout_mask(DT t, void* out, int64_t n, double p, uint64_t seed, uint64_t first);

// ---------------------------------------------------------------- cross_entropy.cu
// logits [N, C] contiguous, target [N] -> lse [N], per_row [N]; a target neither ignore_index
// nor in [0, C) is recorded in chk (element = its row) and its row's loss is 0.
void ce_forward(DT t, const void* logits, const int64_t* target, int64_t N, int64_t C, int64_t ignore_index, void* lse,
                void* per_row, Check chk);
// *count = the rows whose target is not ignore_index (one block, integers: exact).
void ce_count(const int64_t* target, int64_t N, int64_t ignore_index, int64_t* count);
// loss (one element) = sum(per_row) / divisor: divisor *count (mean) or 1 (count == nullptr);
// a divisor of 0 writes 0.
void ce_reduce(DT t, void* loss, const void* per_row, int64_t N, const int64_t* count);
// reduction = int(k::Reduction); g: one element (mean/sum) or [N] (none); for mean the scale
// is g / count, count = *count_dev when count_dev is set, else count_host. Bad targets as in
// ce_forward (their rows get 0).
void ce_backward(DT t, void* dx, const void* g, int reduction, const int64_t* count_dev, int64_t count_host,
                 const void* logits, const void* lse, const int64_t* target, int64_t N, int64_t C, int64_t ignore_index,
                 Check chk);

// ---------------------------------------------------------------- optim.cu
void adam_update(DT t, void* p, const void* g, void* m, void* v, int64_t n, const AdamScalars& s);

}  // namespace relpos::k::cuda::dev
