// kernels/cpu/attention.cpp — fused attention with a Toeplitz and/or an index-driven position
// bias, forward and backward side by side, never materialising [B, H, Lq, Lk].
//
// Per (batch b, head h) — one OpenMP thread owns the pair — per block of R query rows, and per
// tile of C keys (FlashAttention-2's order; R = 32 or 64 (row_block), C = 256: the [R, C] score
// tile stays in L1 / L2):
//   S   = scale * Q_blk K_tile^T                 [r, c]  (one GEMM; tiles past the block's last
//                                                          visible key are skipped)
//   S  += T[h, j - i + Lq - 1]  (+ table[idx[(b,) i, j], h], index bias [NT, H]);
//   hidden cells (causal predicate, key padding) = -inf
//   (buckets: S += scale qr[i, n(i, j)], n(i, j) = bucket[j - i + Lq - 1], before the masks)
//   online softmax: m' = max(m, max_j S_ij), a = exp(m - m'), E = exp(S - m'),
//                   l = a l + sum_j E_ij, acc = a acc + E' V_tile  (E' = E * M with dropout)
//   (dropout: M_ij = 0 or 1 / (1 - p) from the counter-based draw of cell (b, h, i, j))
//   (buckets: w[i, n] = a w[i, n] + sum_j E'_ij [n(i, j) = n])
//   (row_stats: max_j |S_ij|; ps = sum_j E_ij (S_ij - m) rescaled as ps' = a (ps + (m - m') l))
//   after the last tile: O = acc / l, w /= l, lse = m + log l, entropy = log l - ps / l.
// Backward recomputes each tile's P = exp(S - lse) (no online pass needed):
//   dP = M (dO_blk V_tile^T (+ g_w[i, n(i, j)]));  D_i = dO_i . O_i (+ g_w_i . w_i);  dS = P (dP - D)
//   (D needs no mask: sum_j P_ij dP_ij = sum_j P'_ij (dO_i . v_j + g_w[i, n]) = dO_i . O_i + g_w_i . w_i)
//   (buckets: dqr[i, n] = scale sum over the row's cells of bucket n of dS)
//   dQ_blk += scale dS K_tile;  dK_tile += scale dS^T Q_blk;  dV_tile += P'^T dO_blk   (GEMMs)
//   dT[h, t] += sum over the tile's cells on diagonal t of dS (float64, per (b, h)),
//   (index bias: dtab[b, h, n] += sum over the tile's cells with idx[(b,) i, j] = n of dS, float64)
// then dT[h] = sum over b (dtable[n, h] = sum over b of dtab[b, h, n]) in order b = 0, 1, ...:
// deterministic for any thread count.
// Autocast (AttentionArgs::inputs / probs): q, k, v, dO are read as 16-bit values, and E' (P')
// and dS are rounded to 16 bits right before E' V, P'^T dO, dS K and dS^T Q (after l, the bucket
// sums and the bias gradients took their float32 values); under bf16 every product then runs on
// bf16 pairs (kernels/cpu/tile_gemm.h) with the float32 tiles' bits.
// Memory: one [R, C] tile (backward: two) per thread and the head's keys transposed [dh, Lk]
// (backward: keys and values) (+ the [B, H, Lq, NB] bucket terms; the backward's index-bias
// partials [B, H, NT] float64). The tile products run on one thread each (float32: the
// micro-kernels of kernels/cpu/tile_gemm.h; float64: OpenBLAS dgemm, which runs serially inside a
// parallel region), so parallelism is over (b, h).
#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/float16.h"
#include "kernels/backend.h"
#include "kernels/cpu/bf16_convert.h"
#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/tile_gemm.h"

namespace relpos::k::cpu {

namespace {

// Query rows per block (row_block): 32 on the float32 and float64 tiles up to 512 keys, else 64.
// With 32 rows a [32, 256] float32 score tile (32 KiB) stays in L1 between its product and the
// row passes over it, and a causal block computes half as many hidden cells on its diagonal; but
// each key tile's dK and dV are then loaded and stored once per 32 rows instead of 64, which
// costs more than it saves with many key tiles. Measured fwd / bwd ms (causal, 8 heads, dh 32,
// 2 threads), 32 rows vs 64: [8, 128 keys] 0.57-0.62 / 1.08-1.14 vs 0.73-0.76 / 1.27-1.39;
// [8, 256] 1.71 / 3.46 vs 1.85 / 3.74; [4, 512] 2.99-3.05 / 6.16-6.25 vs 3.28-3.50 / 6.71-7.01;
// [2, 1024] within the noise; [1, 2048] 11.8-12.6 / 26.3-27.9 vs 11.0-11.8 / 22.6-24.1. (dK and
// dV sum their rows' products 32 at a time: float32 rounding-level changes; o, lse and dq the
// same bits.) The bf16 pairs keep 64 rows: 32 measured within the noise there, and their AMX
// sums would regroup.
constexpr int64_t kRowBlock = 64;   // the most: the tiles' size
constexpr int64_t kKeyBlock = 256;  // keys per tile: [64, 256] floats = 64 KiB

// C[M, N] = (C +) alpha A B with A(i, k) = a[i a_rs + k a_cs] (A or A^T of a row-major matrix;
// one of the strides is 1) and B's rows contiguous: float32 on the micro-kernels of
// kernels/cpu/tile_gemm.h, float64 (gradchecks) on OpenBLAS dgemm.
template <typename T>
void tile_mm(int64_t M, int64_t N, int64_t K, T alpha, const T* a, int64_t a_rs, int64_t a_cs, const T* b, int64_t ldb,
             bool accumulate, T* c, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    tile_gemm(TileGemm{M, N, K, alpha, a, a_rs, a_cs, b, ldb, accumulate, c, ldc});
  } else {
    const BlasOperand la = blas_operand(M, K, a_rs, a_cs);
    cblas_dgemm(CblasRowMajor, la.trans ? CblasTrans : CblasNoTrans, CblasNoTrans, int(M), int(N), int(K), alpha, a,
                int(la.ld), b, int(std::max<int64_t>({ldb, N, 1})), accumulate ? 1.0 : 0.0, c,
                int(std::max<int64_t>({ldc, N, 1})));
  }
}

// x as the nearest value of `in`'s 16-bit format (autocast: AttentionArgs::inputs); float32
// only, float64 and F32 unchanged.
template <typename T>
T round16(GemmInputs in, T x) {
  if constexpr (std::is_same_v<T, float>) {
    if (in == GemmInputs::BF16) return round_to_bf16(x);
    if (in == GemmInputs::FP16) return round_to_fp16(x);
  }
  return x;
}

// Row stride of a transposed operand [dh, L]: L padded by one cache line. With L a multiple of
// 1024 floats (T = 2048), rows L apart fall into the same L1 set, and a micro-kernel block's 32
// rows of B^T evicted each other (a 12-way L1).
template <typename T>
int64_t transposed_ld(int64_t L) {
  return L + 64 / int64_t(sizeof(T));
}

// xt[e, j] = x[j, e] for the L rows of one head (row stride ld), rounded by round16: a B^T
// operand with contiguous rows for tile_mm ([dh, L], row stride transposed_ld(L)).
template <typename T>
void transpose_rows(const T* x, int64_t ld, int64_t L, int64_t dh, GemmInputs in, std::vector<T>& xt) {
  const int64_t ldt = transposed_ld<T>(L);
  xt.resize(size_t(dh * ldt));
  T* out = xt.data();
  constexpr int64_t kJ = 16;  // 16 rows at a time: contiguous runs of 16 writes per e, reads from L1
  for (int64_t j0 = 0; j0 < L; j0 += kJ) {
    const int64_t nj = std::min(kJ, L - j0);
    for (int64_t e = 0; e < dh; ++e) {
      T* o = out + e * ldt + j0;
      const T* xe = x + j0 * ld + e;
      for (int64_t jj = 0; jj < nj; ++jj) o[jj] = round16(in, xe[jj * ld]);
    }
  }
}

// The L rows of one head (row stride ld) rounded to `in`'s 16-bit format into buf, dense (row
// stride dh); returns buf's data. Only called with 16-bit inputs, which are float32.
template <typename T>
const T* rounded_rows(const T* x, int64_t ld, int64_t L, int64_t dh, GemmInputs in, std::vector<T>& buf) {
  buf.resize(size_t(L * dh));
  if constexpr (std::is_same_v<T, float>) round_block(in == GemmInputs::BF16, x, ld, buf.data(), dh, L, dh);
  return buf.data();
}

// The L rows of one head (row stride ld) rounded in place (16-bit inputs only, as above).
template <typename T>
void round_rows(T* x, int64_t ld, int64_t L, int64_t dh, GemmInputs in) {
  if constexpr (std::is_same_v<T, float>) round_block(in == GemmInputs::BF16, x, ld, x, ld, L, dh);
}

template <typename T>
T exp_t(T x) {
  if constexpr (std::is_same_v<T, float>) return fast::exp_f32(x);
  else return std::exp(x);
}

// exp(z) for z = S - (running max or lse) <= 0, flushed to 0 below e^-44 (float; e^-700 for
// double). A flushed key weighs < 2^-63 of the row's largest, so the output moves by less than
// 2^-50 relative even over 8192 keys, far below float32 rounding. Without the flush, ALiBi's
// steep biases leave bands of keys with P in 1e-38..1e-20: their products in the PV and
// backward GEMMs are subnormal, and x86 microcode assists on subnormals made a T=2048 ALiBi
// step 2.5x slower than the same step without a bias (bench/RESULTS.md).
template <typename T>
T exp_flushed(T z) {
  constexpr T kFlushBelow = std::is_same_v<T, float> ? T(-44) : T(-700);
  const T e = exp_t<T>(z);
  return z < kFlushBelow ? T(0) : e;
}

// The rows' exp passes (the online softmax's E = exp(S - m) with its sum, the backward's
// P = exp(S - lse)) and the row max, 16 floats at a time where the CPU has AVX-512: exp_f32's
// range reduction and polynomial with the power of two applied by vscalefps (z >= -44 keeps 2^n a
// normal number, so no clamp, integer conversion or NaN fix-up is needed), the tail under a mask
// (every element through the same code), the sum and max in 16 lanes reduced once per row. The
// compiler's vectorisation of exp_flushed spent ~25 instructions a vector on exp_f32's clamps and
// selects and ended each row in a serial 16-add (and 16-max) epilogue: ~70% of the backward's
// non-product time at T = 2048. tests/kernels/test_fused_attention.cpp holds float32 o, lse and
// every gradient to float64.
#if defined(__AVX512F__)
inline __m512 exp_flushed16(__m512 z) {
  // n = floor(z log2 e + 1/2) (the masked form: GCC 12's unmasked one reads an undefined vector)
  const __m512 n = _mm512_mask_roundscale_ps(_mm512_setzero_ps(), __mmask16(0xFFFF),
                                             _mm512_fmadd_ps(z, _mm512_set1_ps(fast::kExpLog2e), _mm512_set1_ps(0.5f)),
                                             _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(fast::kExpLn2Hi), z);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(fast::kExpLn2Lo), r);
  __m512 p = _mm512_set1_ps(fast::kExpPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(fast::kExpPoly[i]));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  const __mmask16 flush = _mm512_cmp_ps_mask(z, _mm512_set1_ps(-44.0f), _CMP_LT_OQ);  // (-inf: masked keys)
  return _mm512_maskz_scalef_ps(_mm512_knot(flush), y, n);
}

inline __mmask16 tail_mask(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
}

// f(j, k) for each 16-float vector of a row of c floats: the whole vectors with k = every lane
// (a constant once f is inlined: its masked loads and stores compile to plain ones; with a mask
// on every vector the T = 256 forward measured ~3% slower), then the tail under its mask.
template <typename F>
inline void for_vectors(int64_t c, F f) {
  int64_t j = 0;
  for (; j + 16 <= c; j += 16) f(j, __mmask16(0xFFFF));
  if (j < c) f(j, tail_mask(c - j));
}

// The 16 lanes of v combined pairwise (lane l with l + 8, then + 4, + 2, + 1): a fixed order,
// in registers (op on vectors: lane l of the partner vector holds lane l ^ w). Through a stack
// array and scalar ops (as before) the store-to-load round trip and the serial chain were ~12% of
// the forward's non-product samples (T = 256).
template <typename Op>
inline float reduce16(__m512 v, Op op) {
  // (the masked forms with every lane set: GCC 12's unmasked ones read an undefined vector)
  constexpr __mmask16 all = 0xFFFF;
  v = op(v, _mm512_mask_shuffle_f32x4(v, all, v, v, _MM_SHUFFLE(1, 0, 3, 2)));  // l ^ 8
  v = op(v, _mm512_mask_shuffle_f32x4(v, all, v, v, _MM_SHUFFLE(2, 3, 0, 1)));  // l ^ 4
  v = op(v, _mm512_mask_permute_ps(v, all, v, _MM_SHUFFLE(1, 0, 3, 2)));        // l ^ 2
  v = op(v, _mm512_mask_permute_ps(v, all, v, _MM_SHUFFLE(2, 3, 0, 1)));        // l ^ 1
  return _mm512_cvtss_f32(v);
}
#endif

// Zeroes L rows of dh values (row stride ld): the forward's accumulator rows and the backward's
// dQ, dK, dV of one (b, h). With AVX-512, float rows as masked vector stores: std::fill became
// one memset call per 32- or 64-float row (perf: ~1% of a small float32 step in memset).
template <typename T>
void zero_rows(T* p, int64_t ld, int64_t L, int64_t dh) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t i = 0; i < L; ++i)
      for (int64_t e = 0; e < dh; e += 16)
        _mm512_mask_storeu_ps(p + i * ld + e, tail_mask(dh - e), _mm512_setzero_ps());
    return;
  }
#endif
  for (int64_t i = 0; i < L; ++i) std::fill(p + i * ld, p + i * ld + dh, T(0));
}

// x[j] = exp_flushed(x[j] - m) for j < c; returns their sum (the forward's E = exp(S - m') and l).
template <typename T>
T exp_sum_row(T* x, int64_t c, T m) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    const __m512 mv = _mm512_set1_ps(m);
    __m512 acc = _mm512_setzero_ps();
    for_vectors(c, [&](int64_t j, __mmask16 k) {
      const __m512 e = exp_flushed16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), mv));
      _mm512_mask_storeu_ps(x + j, k, e);
      acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(k, e));  // (lanes past c hold exp(-m), not 0)
    });
    return reduce16(acc, [](__m512 a, __m512 b) { return _mm512_add_ps(a, b); });
  }
#endif
  T total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t j = 0; j < c; ++j) {
    const T e = exp_flushed<T>(x[j] - m);
    x[j] = e;
    total += e;
  }
  return total;
}

// One row of the backward: p[j] = P = exp_flushed(S - l) in place of S (0 for a row without a
// visible key, l = -inf), then d[j] = dS = P (dP - dl) in place of dP, in one pass.
template <typename T>
void probs_and_ds_row(T* p, T* d, int64_t c, T l, T dl) {
  if (std::isinf(l) && l < 0) {
    std::fill(p, p + c, T(0));
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) d[j] = T(0) * (d[j] - dl);
    return;
  }
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    const __m512 lv = _mm512_set1_ps(l), dlv = _mm512_set1_ps(dl);
    for_vectors(c, [&](int64_t j, __mmask16 k) {
      const __m512 e = exp_flushed16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, p + j), lv));
      _mm512_mask_storeu_ps(p + j, k, e);
      _mm512_mask_storeu_ps(d + j, k, _mm512_mul_ps(e, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, d + j), dlv)));
    });
    return;
  }
#endif
#pragma omp simd
  for (int64_t j = 0; j < c; ++j) {
    p[j] = exp_flushed<T>(p[j] - l);
    d[j] = p[j] * (d[j] - dl);
  }
}

// max_j x[j]: -inf for an empty or all -inf row; NaN entries are skipped (a NaN score still
// reaches the output through its exp).
template <typename T>
T max_row(const T* x, int64_t c) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    __m512 acc = ninf;
    for_vectors(c, [&](int64_t j, __mmask16 k) {  // vmaxps returns its second operand (acc) when either is NaN
      acc = _mm512_mask_max_ps(acc, __mmask16(0xFFFF), _mm512_mask_loadu_ps(ninf, k, x + j), acc);
    });
    return reduce16(
        acc, [](__m512 a, __m512 b) { return _mm512_mask_max_ps(a, __mmask16(0xFFFF), a, b); });  // a > b ? a : b
  }
#endif
  T mt = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : mt)  // (without the pragma: a serial vmaxss chain, 70% of the forward)
  for (int64_t jj = 0; jj < c; ++jj) mt = x[jj] > mt ? x[jj] : mt;
  return fast::simd_max_fixup(mt, x, c);
}

struct Dims {
  int64_t B, H, Lq, Lk, dh;
};
// q [B, H, Lq, dh], k [B, H, Lk, dh] (checked in kernels/checks.cpp).
Dims dims_of(const Tensor& q, const Tensor& k) {
  return {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
}

// A [B, H, L, dh] operand read or written in place when its rows are contiguous (stride(3) ==
// 1): element (b, h, i, e) at b s0 + h s1 + i ld + e. The heads of a [B, L, H, dh] projection
// are such a view (ld = H dh), so q, k, v come in and o, dq, dk, dv go out in the layout of the
// projections, with no transpose copies on either side of the kernel.
template <typename T>
struct HeadRows {
  T* p;
  int64_t s0, s1, ld;
  T* at(int64_t b, int64_t h) const { return p + b * s0 + h * s1; }
};
template <typename T>
HeadRows<T> head_rows(const Tensor& t) {
  return {t.data<std::remove_const_t<T>>(), t.strides()[0], t.strides()[1], t.strides()[2]};
}
Tensor rows_view(const Tensor& t) { return t.strides()[3] == 1 || t.size(3) <= 1 ? t : t.contiguous(); }
// A new [B, H, L, dh] tensor stored as [B, L, H, dh] (uninitialised).
Tensor heads_layout(int64_t B, int64_t H, int64_t L, int64_t dh, DType dtype) {
  Tensor t = Tensor::empty({B, L, H, dh}, dtype);
  return t.permute({0, 2, 1, 3});
}

// The index of an index bias as a contiguous host tensor, every entry checked in [0, NT).
// index_rows(b) points at batch b's [Lq, Lk] rows (the shared ones for a 2-d index).
struct IndexRows {
  Tensor t;  // int64 [Lq, Lk] or [B, Lq, Lk], contiguous (undefined: no index bias)
  int64_t nt = 0;
  const int64_t* rows(const Dims& d, int64_t b) const {
    if (!t.defined()) return nullptr;
    return t.data<int64_t>() + (t.dim() == 3 ? b * d.Lq * d.Lk : 0);
  }
};

IndexRows index_rows(const AttentionIndexBias& ib, const char* op) {
  IndexRows r;
  if (!ib.index.defined()) return r;
  r.t = ib.index.contiguous();
  r.nt = ib.table.size(0);
  const int64_t* p = r.t.data<int64_t>();
  const int64_t n = r.t.numel();
  for (int64_t e = 0; e < n; ++e)
    if (p[e] < 0 || p[e] >= r.nt) {
      const Shape sh = r.t.shape();
      const int64_t Lk = sh.back(), Lq = sh[sh.size() - 2];
      const int64_t j = e % Lk, i = (e / Lk) % Lq, b = e / (Lq * Lk);
      const std::string at = r.t.dim() == 3 ? fmt::format("[{}, {}, {}]", b, i, j) : fmt::format("[{}, {}]", i, j);
      ::relpos::fail("{}: index-bias index{} = {} is outside the table rows [0, {})", op, at, p[e], r.nt);
    }
  return r;
}

// The bucket index as checked host integers (every entry in [0, NB)), with its runs: end[t] is
// the first t' > t whose bucket differs. A row's cells beyond the clip distance share one
// bucket, so a row is a handful of runs (two constant ones and a band of single cells), and
// each run is a constant add or a plain sum instead of a gather or scatter per cell.
struct BucketRuns {
  std::vector<int64_t> n, end;
  // f(a, b, bucket) for each maximal run [a, b) of equal buckets among t0 .. t1-1, a and b
  // relative to t0.
  template <typename F>
  void for_runs(int64_t t0, int64_t t1, F&& f) const {
    for (int64_t t = t0; t < t1;) {
      const int64_t e = std::min(end[size_t(t)], t1);
      f(t - t0, e - t0, n[size_t(t)]);
      t = e;
    }
  }
};

BucketRuns bucket_index(const AttentionBuckets& bk, const char* op) {
  BucketRuns r;
  if (!bk.bucket.defined()) return r;
  r.n = bk.bucket.to_vector<int64_t>();
  const int64_t nb = bk.qr.size(3);
  for (size_t t = 0; t < r.n.size(); ++t)
    RELPOS_CHECK(r.n[t] >= 0 && r.n[t] < nb, "{}: bucket[{}] = {} is outside [0, {})", op, t, r.n[t], nb);
  r.end.resize(r.n.size());
  for (size_t t = r.n.size(); t-- > 0;)
    r.end[t] = (t + 1 < r.n.size() && r.n[t + 1] == r.n[t]) ? r.end[t + 1] : int64_t(t + 1);
  return r;
}

// The operands of one head's S = Q K^T: Q's rows (row stride ldq) and the keys transposed kt
// [dh, Lk]; or, when both are bf16 values and the tiles multiply bf16 pairs
// (kernels/cpu/tile_gemm.h, tile_pairs_enabled), the same values as pair words: qw [Lq, dh / 2]
// (pack_pairs_rows) and kw [dh / 2, Lk] (pack_pairs_cols), and q / kt unused.
template <typename T>
struct ScoreOperands {
  const T* q = nullptr;
  int64_t ldq = 0;
  const T* kt = nullptr;
  const uint32_t* qw = nullptr;
  const uint32_t* kw = nullptr;
};

// Whether this call's bf16-valued products run on bf16 pairs: float32 under bf16 autocast, an even
// head_dim and a CPU (and RELPOS_TILE_GEMM) with the pair kernels. The same bits either way, except on AMX
// (kernels/cpu/tile_gemm.h).
template <typename T>
bool use_pairs(const Dims& d, const AttentionArgs& a) {
  return std::is_same_v<T, float> && a.inputs == GemmInputs::BF16 && d.dh % 2 == 0 && tile_pairs_enabled();
}

constexpr int64_t row_block(bool pairs, int64_t Lk) {
  return pairs || Lk > 512 ? kRowBlock : kRowBlock / 2;
}

// C[r, c] = alpha A B for a block of rows i0.. of A (row-major, stride lda) and columns j0.. of B^T
// ([dh, L], row stride transposed_ld(L)): the float32 / float64 product, or the pair product on the same values
// packed as words (aw [., dh / 2], bw [dh / 2, L]).
template <typename T>
void rows_by_cols(const Dims& d, int64_t L, T alpha, const T* A, int64_t lda, const T* Bt, const uint32_t* aw,
                  const uint32_t* bw, int64_t i0, int64_t r, int64_t j0, int64_t c, T* out) {
  if constexpr (std::is_same_v<T, float>) {
    if (aw) {
      const int64_t np = d.dh / 2;
      return tile_gemm_pairs(tile_isa(), TilePairs{r, c, np, alpha, aw + i0 * np, np, bw + j0, L, out, c});
    }
  }
  tile_mm<T>(r, c, d.dh, alpha, A + i0 * lda, lda, 1, Bt + j0, transposed_ld<T>(L), false, out, c);
}

// Whether P and dS enter their products as bf16 pairs (AttentionArgs::probs): bf16 probabilities
// and bf16 operands on the other side (inputs), on a CPU with the pair kernels.
template <typename T>
bool probs_pairs(const AttentionArgs& a) {
  return std::is_same_v<T, float> && a.probs == GemmInputs::BF16 && a.inputs == GemmInputs::BF16 &&
         tile_pairs_enabled();
}

// The probability-like tile x [r, c] (row stride c: P' or dS) rounded in place to a.probs's 16-bit
// format (float32 under autocast; nothing otherwise, and nothing needed when probs_pairs packs it).
template <typename T>
void round_tile(const AttentionArgs& a, T* x, int64_t r, int64_t c) {
  if constexpr (std::is_same_v<T, float>)
    if (a.probs != GemmInputs::F32 && !probs_pairs<T>(a)) round_block(a.probs == GemmInputs::BF16, x, c, x, c, r, c);
}

// out += alpha X Y for a tile x [r, c] (row stride c): X = x, Y with c rows; or X = x^T
// (transposed), Y with r rows. Y's rows at y (row stride ldy, dh columns). On bf16 pairs when
// probs_pairs (x and Y packed as words, x rounded while packed; Y holds bf16 values), else the
// float32 / float64 tiles on x as it is (round_tile rounded it).
template <typename T>
void tile_by_rows(const AttentionArgs& a, int64_t r, int64_t c, bool transposed, T alpha, const T* x, const T* y,
                  int64_t ldy, int64_t dh, T* out, int64_t ldo) {
  const int64_t M = transposed ? c : r, K = transposed ? r : c;
  if constexpr (std::is_same_v<T, float>) {
    if (probs_pairs<T>(a)) {
      thread_local Scratch<uint32_t> xw, yw;
      const int64_t np = (K + 1) / 2;
      TilePairs g{M, dh, np, alpha, nullptr, np, pack_row_pairs(y, ldy, K, dh, yw), dh, out, ldo};
      g.accumulate = true;
      if (transposed && cpu_converts_bf16()) {  // A(i, p) = (x[2p, i], x[2p + 1, i]), by row of A
        uint32_t* w = xw.get(size_t(M * np));
        bf16_col_pair_words_native(x, c, r, c, w, np);
        g.a = w;
      } else if (transposed) {  // the same words read with a stride (AMX copies them by row first)
        g.a = pack_row_pairs(x, c, r, c, xw);
        g.a_rs = 1, g.a_ps = c;
      } else {
        g.a = pack_pairs_rows(x, c, r, c, xw);
      }
      return tile_gemm_pairs(tile_isa(), g);
    }
  }
  tile_mm<T>(M, dh, K, alpha, x, transposed ? 1 : c, transposed ? c : 1, y, ldy, true, out, ldo);
}

// The scores of rows i0 .. i0+r-1 against keys j0 .. j0+c-1, biased and masked, into s [r, c]
// (row stride c). Hidden cells are -inf.
// tab_h: the index bias's table column of head h (entry n at tab_h[n H]); ix_b: batch b's index
// rows [Lq, Lk] (both null without an index bias).
template <typename T>
void tile_scores(const Dims& d, const AttentionArgs& a, const ScoreOperands<T>& so, const T* th, const double* kp_b,
                 const T* qr, int64_t nb, const BucketRuns& bucket, const T* tab_h, const int64_t* ix_b, int64_t i0,
                 int64_t r, int64_t j0, int64_t c, T* s) {
  rows_by_cols<T>(d, d.Lk, T(a.scale), so.q, so.ldq, so.kt, so.qw, so.kw, i0, r, j0, c, s);
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  for (int64_t ii = 0; ii < r; ++ii) {
    const int64_t i = i0 + ii;
    T* si = s + ii * c;
    if (th) {
      const T* row_bias = th + (d.Lq - 1 - i) + j0;  // row_bias[jj] = T[h, j0 + jj - i + Lq - 1]
#pragma omp simd
      for (int64_t jj = 0; jj < c; ++jj) si[jj] += row_bias[jj];
    }
    if (ix_b) {  // index bias: si[jj] += table[idx[i, j0 + jj], h]
      const int64_t* ix = ix_b + i * d.Lk + j0;
      const int64_t H = d.H;
      for (int64_t jj = 0; jj < c; ++jj) si[jj] += tab_h[ix[jj] * H];
    }
    if (qr) {  // bucketed score term, scaled like q k^T
      const T* qri = qr + i * nb;
      const T sc = T(a.scale);
      const int64_t t0 = (d.Lq - 1 - i) + j0;  // bucket index of cell jj = 0
      bucket.for_runs(t0, t0 + c, [&](int64_t ja, int64_t jb, int64_t n) {
        const T add = sc * qri[n];
#pragma omp simd
        for (int64_t jj = ja; jj < jb; ++jj) si[jj] += add;
      });
    }
    if (a.causal) {
      const int64_t visible = std::clamp<int64_t>(a.q_offset + i - a.k_offset + 1 - j0, 0, c);
      std::fill(si + visible, si + c, kNegInf);
    }
    if (kp_b)
      for (int64_t jj = 0; jj < c; ++jj)
        if (kp_b[j0 + jj] != 0.0) si[jj] = kNegInf;
  }
}

// Keys visible to any row of the block (all keys without a causal mask).
int64_t block_key_end(const Dims& d, const AttentionArgs& a, int64_t i0, int64_t r) {
  if (!a.causal) return d.Lk;
  return std::clamp<int64_t>(a.q_offset + (i0 + r - 1) - a.k_offset + 1, 0, d.Lk);
}

// The dropout multipliers of cells j0 .. j0+c-1 of global row `row` (b H + h) Lq + i: the
// draws k::dropout_mask makes for element row * Lk + j of a [B, H, Lq, Lk] tensor.
template <typename T>
void dropout_row(const AttentionArgs& a, int64_t Lk, int64_t row, int64_t j0, int64_t c, T* m) {
  const T keep = T(1.0 / (1.0 - a.dropout_p));
  const uint64_t base = a.dropout_first + uint64_t(row) * uint64_t(Lk) + uint64_t(j0);
  for (int64_t jj = 0; jj < c; ++jj)
    m[jj] = rng_uniform(a.dropout_seed, base + uint64_t(jj)) < a.dropout_p ? T(0) : keep;
}

std::vector<double> padding_rows(const Tensor& kp) {
  return kp.defined() ? kp.to_vector<double>() : std::vector<double>{};
}

// Online-softmax state of one query row across key tiles.
template <typename T>
struct RowState {
  T m = -std::numeric_limits<T>::infinity();  // running max of the visible scores
  T l = 0;                                     // sum_j exp(S_ij - m)
  T ps = 0;                                    // sum_j exp(S_ij - m) (S_ij - m)   (row_stats)
  T mabs = 0;                                  // max_j |S_ij|                      (row_stats)
};

// One row of a score tile -> E' = exp(S - m') (* M), in place; updates the row state and returns
// the factor a = exp(m - m') that the row's earlier accumulators (acc, w) must be scaled by.
template <typename T>
T online_row(RowState<T>& st, T* si, int64_t c, bool stats, const T* mask) {
  const T mt = max_row(si, c);
  const T m_new = std::max(st.m, mt);
  if (std::isinf(m_new) && m_new < 0) {  // nothing visible so far: E = 0
    std::fill(si, si + c, T(0));
    return T(1);
  }
  const T alpha = (std::isinf(st.m) && st.m < 0) ? T(0) : exp_t<T>(st.m - m_new);
  if (stats) st.ps = alpha == T(0) ? T(0) : alpha * (st.ps + (st.m - m_new) * st.l);
  st.l *= alpha;
  st.m = m_new;
  T sum = 0;
  if (stats) {
    T ps = 0, mabs = st.mabs;
    for (int64_t jj = 0; jj < c; ++jj) {
      const T x = si[jj];
      if (std::isinf(x)) {  // hidden key (-inf)
        si[jj] = T(0);
        continue;
      }
      mabs = std::max(mabs, std::abs(x));
      const T z = x - m_new, e = exp_flushed<T>(z);
      si[jj] = e;
      sum += e;
      ps += e * z;
    }
    st.ps += ps;
    st.mabs = mabs;
  } else {
    sum = exp_sum_row(si, c, m_new);
  }
  st.l += sum;
  if (mask)
    for (int64_t jj = 0; jj < c; ++jj) si[jj] *= mask[jj];
  return alpha;
}

// Per-(b, h) float64 partials [B, H, n] summed over b in order b = 0, 1, ... (deterministic for
// any thread count), as [H, n], or as [n, H] when head_last (a table with a column per head).
template <typename T>
Tensor sum_over_batch(const std::vector<double>& parts, const Dims& d, int64_t n, bool head_last) {
  Tensor out = Tensor::empty(head_last ? Shape{n, d.H} : Shape{d.H, n}, dtype_of<T>());
  T* po = out.data<T>();
  for (int64_t h = 0; h < d.H; ++h)
    for (int64_t t = 0; t < n; ++t) {
      double acc = 0;
      for (int64_t b = 0; b < d.B; ++b) acc += parts[size_t((b * d.H + h) * n + t)];
      po[head_last ? t * d.H + h : h * n + t] = T(acc);
    }
  return out;
}

// ---------------------------------------------------------------- forward and backward

// The call's inputs as the kernels read them (forward and backward alike): [B, H, L, dh] views
// with contiguous rows, the biases contiguous, every bucket and index entry checked.
struct CallInputs {
  Dims d{};
  BucketRuns bucket;
  IndexRows index;
  Tensor table;             // [NT, H] (index bias) or undefined
  Tensor qr;                // [B, H, Lq, NB] (buckets) or undefined
  int64_t nb = 0;           // NB (0 without buckets)
  Tensor q, k, v;           // [B, H, L, dh], rows contiguous
  Tensor bias;              // [H, Lq + Lk - 1] or undefined
  std::vector<double> pad;  // key padding [B, Lk] (empty: none)
};

CallInputs call_inputs(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& bias_in,
                       const Tensor& kp, const AttentionBuckets& bk, const AttentionIndexBias& ib, const char* op) {
  CallInputs in;
  in.d = dims_of(q_in, k_in);
  in.bucket = bucket_index(bk, op);
  in.index = index_rows(ib, op);
  in.table = ib.table.defined() ? ib.table.contiguous() : Tensor();
  in.qr = bk.qr.defined() ? bk.qr.contiguous() : Tensor();
  in.nb = in.qr.defined() ? in.qr.size(3) : 0;
  in.q = rows_view(q_in), in.k = rows_view(k_in), in.v = rows_view(v_in);
  in.bias = bias_in.defined() ? bias_in.contiguous() : Tensor();
  in.pad = padding_rows(kp);
  return in;
}

// The bias operands of head (b, h) that tile_scores adds (null: absent).
template <typename T>
struct HeadBias {
  const T* th = nullptr;          // the Toeplitz row of head h [Lq + Lk - 1]
  const double* kp_b = nullptr;   // batch b's key padding [Lk]
  const T* qr = nullptr;          // (b, h)'s bucket terms [Lq, NB]
  const T* tab_h = nullptr;       // the index-bias table's column h (entry n at tab_h[n H])
  const int64_t* ix_b = nullptr;  // batch b's index rows [Lq, Lk]
};

template <typename T>
HeadBias<T> head_bias(const CallInputs& in, int64_t b, int64_t h) {
  const Dims& d = in.d;
  HeadBias<T> hb;
  if (in.bias.defined()) hb.th = in.bias.data<T>() + h * (d.Lq + d.Lk - 1);
  if (!in.pad.empty()) hb.kp_b = in.pad.data() + b * d.Lk;
  if (in.nb > 0) hb.qr = in.qr.data<T>() + (b * d.H + h) * d.Lq * in.nb;
  if (in.table.defined()) hb.tab_h = in.table.data<T>() + h;
  hb.ix_b = in.index.rows(d, b);
  return hb;
}

// The scores of rows i0 .. i0+r-1 of head (b, h) against keys j0 .. j0+c-1 into s [r, c]
// (tile_scores with the head's bias operands).
template <typename T>
void head_scores(const CallInputs& in, const AttentionArgs& a, const ScoreOperands<T>& so, const HeadBias<T>& hb,
                 int64_t i0, int64_t r, int64_t j0, int64_t c, T* s) {
  tile_scores<T>(in.d, a, so, hb.th, hb.kp_b, hb.qr, in.nb, in.bucket, hb.tab_h, hb.ix_b, i0, r, j0, c, s);
}

// ---------------------------------------------------------------- forward

// One thread's forward scratch: a score tile, a dropout row, the keys transposed and the rounded
// copies of q and v, the row states of a block.
template <typename T>
struct ForwardScratch {
  std::vector<T> s = std::vector<T>(size_t(kRowBlock * kKeyBlock)), mrow = std::vector<T>(size_t(kKeyBlock)), kt, qbuf,
                 vbuf;
  std::vector<RowState<T>> st = std::vector<RowState<T>>(size_t(kRowBlock));
};

// Where head (b, h) writes: o's rows (the accumulator until normalised), lse, the bucket sums w
// and the row monitors (indexed by global row (b H + h) Lq + i).
template <typename T>
struct ForwardHeadOut {
  T* o;
  int64_t ldo;
  T* lse;   // [Lq]
  T* w;     // [Lq, NB] or null
  T* pmax;  // [B H Lq] or null (row_stats)
  T* pent;  // [B H Lq] or null (row_stats)
};

// Key tile j0 .. j0+c-1 of a block of r rows at i0: scores, the online softmax of each row (with
// its bucket sums), then acc += E' V_tile.
template <typename T>
void forward_tile(const CallInputs& in, const AttentionArgs& a, const ScoreOperands<T>& so, const HeadBias<T>& hb,
                  const T* V, int64_t ldv, const ForwardHeadOut<T>& ho, int64_t bh, int64_t i0, int64_t r, int64_t j0,
                  int64_t c, ForwardScratch<T>& sc) {
  const Dims& d = in.d;
  const int64_t nb = in.nb;
  T* acc = ho.o + i0 * ho.ldo;  // [r, dh] (row stride ldo), the unnormalised output
  head_scores<T>(in, a, so, hb, i0, r, j0, c, sc.s.data());
  for (int64_t ii = 0; ii < r; ++ii) {
    T* si = sc.s.data() + ii * c;
    const int64_t row = bh * d.Lq + i0 + ii;
    if (a.dropout_p > 0) dropout_row<T>(a, d.Lk, row, j0, c, sc.mrow.data());
    const T alpha =
        online_row<T>(sc.st[size_t(ii)], si, c, ho.pmax != nullptr, a.dropout_p > 0 ? sc.mrow.data() : nullptr);
    T* wi = ho.w ? ho.w + (i0 + ii) * nb : nullptr;
    if (alpha != T(1) && j0 > 0) {  // rescale what earlier tiles accumulated (none before tile 0)
      T* ai = acc + ii * ho.ldo;
      for (int64_t e = 0; e < d.dh; ++e) ai[e] *= alpha;
      if (wi)
        for (int64_t n = 0; n < nb; ++n) wi[n] *= alpha;
    }
    if (wi) {  // E' summed per bucket
      const int64_t t0 = (d.Lq - 1 - (i0 + ii)) + j0;
      in.bucket.for_runs(t0, t0 + c, [&](int64_t ja, int64_t jb, int64_t n) {
        T sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t jj = ja; jj < jb; ++jj) sum += si[jj];
        wi[n] += sum;
      });
    }
  }
  round_tile<T>(a, sc.s.data(), r, c);
  tile_by_rows<T>(a, r, c, false, T(1), sc.s.data(), V + j0 * ldv, ldv, d.dh, acc, ho.ldo);  // acc += E' V
}

// After a block's last tile: o = acc / l (rounded under autocast), w /= l, lse = m + log l and the
// monitors; a row without a visible key keeps o = 0.
template <typename T>
void forward_finish(const Dims& d, const AttentionArgs& a, int64_t nb, const ForwardHeadOut<T>& ho, int64_t bh,
                    int64_t i0, int64_t r, const ForwardScratch<T>& sc) {
  const bool rounding = std::is_same_v<T, float> && a.inputs != GemmInputs::F32;
  for (int64_t ii = 0; ii < r; ++ii) {
    const RowState<T>& sr = sc.st[size_t(ii)];
    const int64_t row = bh * d.Lq + i0 + ii;
    if (sr.l == T(0)) {
      ho.lse[i0 + ii] = -std::numeric_limits<T>::infinity();
      if (ho.pmax) ho.pmax[row] = ho.pent[row] = T(0);
      continue;
    }
    const T inv = T(1) / sr.l;
    T* ai = ho.o + (i0 + ii) * ho.ldo;
    for (int64_t e = 0; e < d.dh; ++e) ai[e] *= inv;
    if (rounding && a.round_output)
      for (int64_t e = 0; e < d.dh; ++e) ai[e] = round16(a.inputs, ai[e]);
    if (ho.w)
      for (int64_t n = 0; n < nb; ++n) ho.w[(i0 + ii) * nb + n] *= inv;
    ho.lse[i0 + ii] = sr.m + std::log(sr.l);
    if (ho.pmax) {
      ho.pmax[row] = sr.mabs;
      ho.pent[row] = std::log(sr.l) - sr.ps * inv;  // -sum P log P, P = E / l
    }
  }
}

// Head bh = b H + h: its operands (rounded copies under autocast, K transposed or Q and K as bf16
// pairs), then each block of query rows over its visible key tiles.
template <typename T>
void forward_head(const CallInputs& in, const AttentionArgs& a, AttentionOut& out, int64_t bh, ForwardScratch<T>& sc) {
  const Dims& d = in.d;
  const int64_t b = bh / d.H, h = bh % d.H;
  const HeadRows<const T> hq = head_rows<const T>(in.q), hk = head_rows<const T>(in.k), hv = head_rows<const T>(in.v);
  const HeadRows<T> hout = head_rows<T>(out.o);
  thread_local Scratch<uint32_t> qw, kw;  // bf16 pairs (use_pairs)
  const bool rounding = std::is_same_v<T, float> && a.inputs != GemmInputs::F32;
  const bool pairs = use_pairs<T>(d, a);
  const int64_t rows = row_block(pairs, d.Lk);
  const T* Q = hq.at(b, h);  // q and v rows, rounded copies (dense, row stride dh) under autocast
  const T* K = hk.at(b, h);
  const T* V = hv.at(b, h);
  int64_t ldq = hq.ld, ldv = hv.ld;
  if (rounding && !pairs) Q = rounded_rows(Q, ldq, d.Lq, d.dh, a.inputs, sc.qbuf), ldq = d.dh;
  if (rounding) V = rounded_rows(V, ldv, d.Lk, d.dh, a.inputs, sc.vbuf), ldv = d.dh;
  ScoreOperands<T> so{Q, ldq};
  if constexpr (std::is_same_v<T, float>) {
    if (pairs) {
      so.qw = pack_pairs_rows(Q, ldq, d.Lq, d.dh, qw);  // (rounded while packed)
      so.kw = pack_pairs_cols(K, hk.ld, d.Lk, d.dh, kw);
    }
  }
  if (!pairs) {
    transpose_rows<T>(K, hk.ld, d.Lk, d.dh, a.inputs, sc.kt);
    so.kt = sc.kt.data();
  }
  const HeadBias<T> hb = head_bias<T>(in, b, h);
  const ForwardHeadOut<T> ho{hout.at(b, h),
                             hout.ld,
                             out.lse.data<T>() + bh * d.Lq,
                             in.nb > 0 ? out.w.data<T>() + bh * d.Lq * in.nb : nullptr,
                             a.row_stats ? out.max_abs.data<T>() : nullptr,
                             a.row_stats ? out.entropy.data<T>() : nullptr};
  for (int64_t i0 = 0; i0 < d.Lq; i0 += rows) {
    const int64_t r = std::min(rows, d.Lq - i0), kend = block_key_end(d, a, i0, r);
    zero_rows(ho.o + i0 * ho.ldo, ho.ldo, r, d.dh);
    std::fill(sc.st.begin(), sc.st.end(), RowState<T>{});
    for (int64_t j0 = 0; j0 < kend; j0 += kKeyBlock)
      forward_tile<T>(in, a, so, hb, V, ldv, ho, bh, i0, r, j0, std::min(kKeyBlock, kend - j0), sc);
    forward_finish<T>(d, a, in.nb, ho, bh, i0, r, sc);
  }
}

// ---------------------------------------------------------------- backward

// One thread's backward scratch: the P and dS tiles, a block's D, a dropout row, the keys and
// values transposed and the rounded copies of q, k and dO.
template <typename T>
struct BackwardScratch {
  std::vector<T> p = std::vector<T>(size_t(kRowBlock * kKeyBlock)), ds = std::vector<T>(size_t(kRowBlock * kKeyBlock)),
                 delta = std::vector<T>(size_t(kRowBlock)), mrow = std::vector<T>(size_t(kKeyBlock)), kt, vt, qbuf,
                 kbuf, gbuf;
};

// Head (b, h)'s operands in the backward: Q, K, dO (rounded copies under autocast), V, O, lse, the
// score operands, dO and V as bf16 pairs for dP (or V transposed), and what it writes.
template <typename T>
struct BackwardHead {
  const T *Q, *K, *V, *G, *O, *lse;
  int64_t ldq, ldk, ldg, ldo;
  ScoreOperands<T> so;
  const T* vt = nullptr;
  const uint32_t *dO_words = nullptr, *v_words = nullptr;
  HeadBias<T> hb;
  const T *w = nullptr, *gw = nullptr;  // [Lq, NB] (buckets; gw null when zero)
  T *dQ, *dK, *dV;
  int64_t lddq, lddk, lddv;
  T* dqr = nullptr;        // [Lq, NB] (buckets)
  double* dT = nullptr;    // [Lq + Lk - 1] float64 partials of (b, h) (Toeplitz bias)
  double* dtab = nullptr;  // [NT] float64 partials of (b, h) (index bias)
};

// Row i0 + ii's dS = P (dP - D) in place in di (dP on entry), from its scores pi (P' on exit),
// with the bucket, dropout and bias-gradient terms of key tile j0 .. j0+c-1.
template <typename T>
void backward_ds_row(const CallInputs& in, const AttentionArgs& a, const BackwardHead<T>& hd, int64_t bh, int64_t i0,
                     int64_t ii, int64_t j0, int64_t c, T dl, T* pi, T* di, T* mrow) {
  const Dims& d = in.d;
  const int64_t nb = in.nb;
  const int64_t t0 = (d.Lq - 1 - (i0 + ii)) + j0;  // bucket index of cell jj = 0
  if (hd.gw) {  // dP'_ij += g_w[i, n(i, j)]
    const T* gwi = hd.gw + (i0 + ii) * nb;
    in.bucket.for_runs(t0, t0 + c, [&](int64_t ja, int64_t jb, int64_t n) {
      const T add = gwi[n];
#pragma omp simd
      for (int64_t jj = ja; jj < jb; ++jj) di[jj] += add;
    });
  }
  if (a.dropout_p > 0) {  // dP = M dP'
    dropout_row<T>(a, d.Lk, bh * d.Lq + i0 + ii, j0, c, mrow);
    for (int64_t jj = 0; jj < c; ++jj) di[jj] *= mrow[size_t(jj)];
  }
  probs_and_ds_row(pi, di, c, hd.lse[i0 + ii], dl);  // P = exp(S - lse), dS = P (dP - D)
  if (hd.dqr) {  // dqr[i, n] = scale sum_{j in bucket n} dS_ij
    T* dqri = hd.dqr + (i0 + ii) * nb;
    const T sc = T(a.scale);
    in.bucket.for_runs(t0, t0 + c, [&](int64_t ja, int64_t jb, int64_t n) {
      T sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t jj = ja; jj < jb; ++jj) sum += di[jj];
      dqri[n] += sc * sum;
    });
  }
  if (a.dropout_p > 0)  // P' for dV
    for (int64_t jj = 0; jj < c; ++jj) pi[jj] *= mrow[size_t(jj)];
  if (hd.dT) {
    double* diag = hd.dT + (d.Lq - 1 - (i0 + ii)) + j0;  // diag[jj] accumulates T[h, j0 + jj - i + Lq - 1]
    for (int64_t jj = 0; jj < c; ++jj) diag[jj] += double(di[jj]);
  }
  if (hd.dtab) {  // dtab[idx[i, j0 + jj]] += dS_ij
    const int64_t* ix = hd.hb.ix_b + (i0 + ii) * d.Lk + j0;
    for (int64_t jj = 0; jj < c; ++jj) hd.dtab[ix[jj]] += double(di[jj]);
  }
}

// A block of r rows at i0 of head bh: D = rowsum(dO * O) (+ g_w . w), then per key tile the
// scores, dP = dO_blk V_tile^T, dS row by row, and the three products.
template <typename T>
void backward_block(const CallInputs& in, const AttentionArgs& a, const BackwardHead<T>& hd, int64_t bh, int64_t i0,
                    int64_t r, BackwardScratch<T>& sc) {
  const Dims& d = in.d;
  const int64_t nb = in.nb, kend = block_key_end(d, a, i0, r);
  for (int64_t ii = 0; ii < r; ++ii) {  // D = rowsum(dO * O) (+ g_w . w)
    const T* gi = hd.G + (i0 + ii) * hd.ldg;
    const T* oi = hd.O + (i0 + ii) * hd.ldo;
    T acc = 0;
#pragma omp simd reduction(+ : acc)  // (without it a serial chain of dependent adds)
    for (int64_t e = 0; e < d.dh; ++e) acc += gi[e] * oi[e];
    if (hd.gw)
      for (int64_t n = 0; n < nb; ++n) acc += hd.gw[(i0 + ii) * nb + n] * hd.w[(i0 + ii) * nb + n];
    sc.delta[size_t(ii)] = acc;
  }
  for (int64_t j0 = 0; j0 < kend; j0 += kKeyBlock) {
    const int64_t c = std::min(kKeyBlock, kend - j0);
    head_scores<T>(in, a, hd.so, hd.hb, i0, r, j0, c, sc.p.data());
    // dP = dO_blk V_tile^T  [r, c]
    rows_by_cols<T>(d, d.Lk, T(1), hd.G, hd.ldg, hd.vt, hd.dO_words, hd.v_words, i0, r, j0, c, sc.ds.data());
    for (int64_t ii = 0; ii < r; ++ii)
      backward_ds_row<T>(in, a, hd, bh, i0, ii, j0, c, sc.delta[size_t(ii)], sc.p.data() + ii * c,
                         sc.ds.data() + ii * c, sc.mrow.data());
    // dQ_blk += scale dS K_tile;  dK_tile += scale dS^T Q_blk;  dV_tile += P'^T dO_blk
    round_tile<T>(a, sc.ds.data(), r, c);
    round_tile<T>(a, sc.p.data(), r, c);
    const T scl = T(a.scale);
    tile_by_rows<T>(a, r, c, false, scl, sc.ds.data(), hd.K + j0 * hd.ldk, hd.ldk, d.dh, hd.dQ + i0 * hd.lddq, hd.lddq);
    tile_by_rows<T>(a, r, c, true, scl, sc.ds.data(), hd.Q + i0 * hd.ldq, hd.ldq, d.dh, hd.dK + j0 * hd.lddk, hd.lddk);
    tile_by_rows<T>(a, r, c, true, T(1), sc.p.data(), hd.G + i0 * hd.ldg, hd.ldg, d.dh, hd.dV + j0 * hd.lddv, hd.lddv);
  }
}

// What the backward reads besides the call's inputs and writes besides dq, dk, dv.
template <typename T>
struct BackwardExtras {
  Tensor g, o, lse;  // dO and O as [B, H, Lq, dh] views, lse contiguous
  const T *w = nullptr, *gw = nullptr;
  T* dqr = nullptr;
  std::vector<double>* dbias_parts = nullptr;   // [B, H, Lq + Lk - 1]
  std::vector<double>* dtable_parts = nullptr;  // [B, H, NT]
};

// Head (b, h)'s operands: Q, K and dO rounded copies (dense, row stride dh) under autocast (also
// for the pair packing: packing straight from the strided heads measured slower, perf samples in
// the packing 8 -> 60 of ~1,700 in a tiny bf16 step); K transposed and V transposed, or Q, K, dO
// and V as bf16 pairs.
template <typename T>
BackwardHead<T> backward_head_operands(const CallInputs& in, const AttentionArgs& a, const BackwardExtras<T>& ex,
                                       AttentionGrads& out, int64_t bh, BackwardScratch<T>& sc) {
  const Dims& d = in.d;
  const int64_t b = bh / d.H, h = bh % d.H, nb = in.nb;
  thread_local Scratch<uint32_t> qw, kw, dow, vw;  // bf16 pairs (use_pairs)
  const bool rounding = std::is_same_v<T, float> && a.inputs != GemmInputs::F32;
  const bool pairs = use_pairs<T>(d, a);
  const HeadRows<const T> hq = head_rows<const T>(in.q), hk = head_rows<const T>(in.k), hv = head_rows<const T>(in.v),
                          hg = head_rows<const T>(ex.g), ho = head_rows<const T>(ex.o);
  const HeadRows<T> hdq = head_rows<T>(out.dq), hdk = head_rows<T>(out.dk), hdv = head_rows<T>(out.dv);
  BackwardHead<T> hd{hq.at(b, h), hk.at(b, h), hv.at(b, h), hg.at(b, h), ho.at(b, h), ex.lse.template data<T>() + bh * d.Lq,
                     hq.ld, hk.ld, hg.ld, ho.ld, {}, nullptr, nullptr, nullptr, head_bias<T>(in, b, h), nullptr, nullptr,
                     hdq.at(b, h), hdk.at(b, h), hdv.at(b, h), hdq.ld, hdk.ld, hdv.ld};
  if (rounding) {
    hd.Q = rounded_rows(hd.Q, hd.ldq, d.Lq, d.dh, a.inputs, sc.qbuf), hd.ldq = d.dh;
    hd.K = rounded_rows(hd.K, hd.ldk, d.Lk, d.dh, a.inputs, sc.kbuf), hd.ldk = d.dh;
    hd.G = rounded_rows(hd.G, hd.ldg, d.Lq, d.dh, a.inputs, sc.gbuf), hd.ldg = d.dh;
  }
  hd.so = ScoreOperands<T>{hd.Q, hd.ldq};
  if constexpr (std::is_same_v<T, float>) {
    if (pairs) {  // Q, K and dO already rounded; V rounded while packed
      hd.so.qw = pack_pairs_rows(hd.Q, hd.ldq, d.Lq, d.dh, qw);
      hd.so.kw = pack_pairs_cols(hd.K, hd.ldk, d.Lk, d.dh, kw);
      hd.dO_words = pack_pairs_rows(hd.G, hd.ldg, d.Lq, d.dh, dow);
      hd.v_words = pack_pairs_cols(hd.V, hv.ld, d.Lk, d.dh, vw);
    }
  }
  if (!pairs) {
    transpose_rows<T>(hd.K, hd.ldk, d.Lk, d.dh, GemmInputs::F32, sc.kt);  // (K already rounded)
    transpose_rows<T>(hd.V, hv.ld, d.Lk, d.dh, a.inputs, sc.vt);
    hd.so.kt = sc.kt.data();
    hd.vt = sc.vt.data();
  }
  if (nb > 0) {
    hd.w = ex.w + bh * d.Lq * nb;
    hd.gw = ex.gw ? ex.gw + bh * d.Lq * nb : nullptr;
    hd.dqr = ex.dqr + bh * d.Lq * nb;
  }
  if (!ex.dbias_parts->empty()) hd.dT = ex.dbias_parts->data() + bh * (d.Lq + d.Lk - 1);
  if (!ex.dtable_parts->empty()) hd.dtab = ex.dtable_parts->data() + bh * in.index.nt;
  return hd;
}

// Head bh: its operands, dQ, dK, dV zeroed by the thread that accumulates them (not a serial
// memset of the whole tensors while the other threads wait: ~1% of a small float32 step), every
// block of rows, then (autocast) the complete gradients rounded to 16 bits.
template <typename T>
void backward_head(const CallInputs& in, const AttentionArgs& a, const BackwardExtras<T>& ex, AttentionGrads& out,
                   int64_t bh, BackwardScratch<T>& sc) {
  const Dims& d = in.d;
  const BackwardHead<T> hd = backward_head_operands<T>(in, a, ex, out, bh, sc);
  zero_rows(hd.dQ, hd.lddq, d.Lq, d.dh);
  zero_rows(hd.dK, hd.lddk, d.Lk, d.dh);
  zero_rows(hd.dV, hd.lddv, d.Lk, d.dh);
  const int64_t rows = row_block(use_pairs<T>(d, a), d.Lk);
  for (int64_t i0 = 0; i0 < d.Lq; i0 += rows) backward_block<T>(in, a, hd, bh, i0, std::min(rows, d.Lq - i0), sc);
  if (std::is_same_v<T, float> && a.inputs != GemmInputs::F32) {  // 16-bit inputs' gradients are 16-bit values
    round_rows(hd.dQ, hd.lddq, d.Lq, d.dh, a.inputs);
    round_rows(hd.dK, hd.lddk, d.Lk, d.dh, a.inputs);
    round_rows(hd.dV, hd.lddv, d.Lk, d.dh, a.inputs);
  }
}

}  // namespace

AttentionOut attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& bias_in,
                       const Tensor& kp, const AttentionArgs& a, const AttentionBuckets& bk,
                       const AttentionIndexBias& ib) {
  ensure_blas_core();
  const CallInputs in = call_inputs(q_in, k_in, v_in, bias_in, kp, bk, ib, "attention");
  const Dims& d = in.d;
  AttentionOut out{heads_layout(d.B, d.H, d.Lq, d.dh, in.q.dtype()), Tensor::empty({d.B, d.H, d.Lq}, in.q.dtype())};
  if (a.row_stats) {
    out.max_abs = Tensor::empty({d.B, d.H, d.Lq}, in.q.dtype());
    out.entropy = Tensor::empty({d.B, d.H, d.Lq}, in.q.dtype());
  }
  if (in.nb > 0) out.w = Tensor::zeros({d.B, d.H, d.Lq, in.nb}, in.q.dtype());
  visit_float(in.q.dtype(), "attention", [&]<typename T>() {
#pragma omp parallel
    {
      ForwardScratch<T> sc;
#pragma omp for schedule(static)
      for (int64_t bh = 0; bh < d.B * d.H; ++bh) forward_head<T>(in, a, out, bh, sc);
    }
  });
  return out;
}

AttentionGrads attention_backward(const Tensor& g_in, const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                  const Tensor& bias_in, const Tensor& kp, const AttentionOut& fwd,
                                  const AttentionArgs& a, const AttentionBuckets& bk, const Tensor& gw_in,
                                  const AttentionIndexBias& ib) {
  ensure_blas_core();
  const CallInputs in = call_inputs(q_in, k_in, v_in, bias_in, kp, bk, ib, "attention_backward");
  const Dims& d = in.d;
  const int64_t nb = in.nb, nt = d.Lq + d.Lk - 1;
  RELPOS_CHECK(nb == 0 || (fwd.w.defined() && fwd.w.shape() == in.qr.shape()),
               "attention_backward: the saved forward has no bucket sums w matching qr {}", describe(in.qr));
  RELPOS_CHECK(!gw_in.defined() || (nb > 0 && gw_in.shape() == in.qr.shape()),
               "attention_backward: the gradient of w {} must be [B, H, Lq, NB] like qr {}", describe(gw_in),
               describe(in.qr));
  RELPOS_CHECK(g_in.shape() == fwd.o.shape() && fwd.lse.defined() && fwd.lse.numel() == d.B * d.H * d.Lq,
               "attention_backward: gradient {} / saved output {} do not match q {}", describe(g_in), describe(fwd.o),
               describe(q_in));
  const Tensor gw = gw_in.defined() ? gw_in.contiguous() : Tensor();
  const Tensor w_t = nb > 0 ? fwd.w.contiguous() : Tensor();
  const DType dtype = in.q.dtype();
  AttentionGrads out{heads_layout(d.B, d.H, d.Lq, d.dh, dtype), heads_layout(d.B, d.H, d.Lk, d.dh, dtype),
                     heads_layout(d.B, d.H, d.Lk, d.dh, dtype), Tensor(), Tensor(), Tensor()};
  if (nb > 0) out.dqr = Tensor::zeros(in.qr.shape(), dtype);
  std::vector<double> dbias_parts(in.bias.defined() ? size_t(d.B * d.H * nt) : 0, 0.0);              // [B, H, nt]
  std::vector<double> dtable_parts(in.table.defined() ? size_t(d.B * d.H * in.index.nt) : 0, 0.0);  // [B, H, NT]
  visit_float(dtype, "attention_backward", [&]<typename T>() {
    BackwardExtras<T> ex{rows_view(g_in), rows_view(fwd.o), fwd.lse.contiguous()};
    ex.w = nb > 0 ? w_t.data<T>() : nullptr;
    ex.gw = gw.defined() ? gw.data<T>() : nullptr;
    ex.dqr = nb > 0 ? out.dqr.data<T>() : nullptr;
    ex.dbias_parts = &dbias_parts, ex.dtable_parts = &dtable_parts;
#pragma omp parallel
    {
      BackwardScratch<T> sc;
#pragma omp for schedule(static)
      for (int64_t bh = 0; bh < d.B * d.H; ++bh) backward_head<T>(in, a, ex, out, bh, sc);
    }
    if (in.bias.defined()) out.dbias = sum_over_batch<T>(dbias_parts, d, nt, false);               // dT [H, nt]
    if (in.table.defined()) out.dtable = sum_over_batch<T>(dtable_parts, d, in.index.nt, true);  // dtable [NT, H]
  });
  return out;
}

}  // namespace relpos::k::cpu
