// kernels/cpu/attention.cpp — fused attention with a Toeplitz position bias, forward and
// backward side by side, never materialising [B, H, Lq, Lk].
//
// Per (batch b, head h) — one OpenMP thread owns the pair — and per block of R query rows:
//   S   = scale * Q_blk K^T                      [r, kend]  (one GEMM; kend = last key the
//                                                            block's last row may see)
//   S  += T[h, j - i + Lq - 1]; hidden cells (causal predicate, key padding) = -inf
//   (buckets: S += scale qr[i, n(i, j)], n(i, j) = bucket[j - i + Lq - 1], before the masks)
//   P   = softmax_rows(S),  lse_i = max_i + log(sum_i)
//   (dropout: P' = P * M, M_ij = 0 or 1 / (1 - p) from the counter-based draw of cell (b, h, i, j))
//   (buckets: w[i, n] = sum_j P'_ij [n(i, j) = n])
//   (row_stats: max_j |S_ij| and entropy_i = log(sum_i) - sum_j P_ij (S_ij - max_i), same pass)
//   O_blk = P' V                                  [r, dh]   (one GEMM)
// Backward recomputes S and P = exp(S - lse) block by block:
//   dP = M (dO_blk V^T (+ g_w[i, n(i, j)]));  D_i = dO_i . O_i (+ g_w_i . w_i);  dS = P (dP - D)
//   (D needs no mask: sum_j P_ij dP_ij = sum_j P'_ij (dO_i . v_j + g_w[i, n]) = dO_i . O_i + g_w_i . w_i)
//   (buckets: dqr[i, n] = scale sum over the row's cells of bucket n of dS)
//   dQ_blk = scale dS K;  dK += scale dS^T Q_blk;  dV += P'^T dO_blk         (GEMMs)
//   dT[h, t] += sum over the block's cells on diagonal t of dS (float64, per (b, h)),
// then dT[h] = sum over b in order b = 0, 1, ...: deterministic for any thread count.
// Memory: R * Lk scores per thread (+ the [B, H, Lq, NB] bucket terms). BLAS calls inside the parallel region run on one thread
// (OpenBLAS-OpenMP checks omp_in_parallel), so parallelism is over (b, h).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "relpos/kernels/backend.h"
#include "relpos/kernels/cpu/fast_math.h"

namespace relpos::k::cpu {

namespace {

constexpr int64_t kRowBlock = 64;

template <typename T>
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t M, int64_t N, int64_t K, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, int(M), int(N), int(K), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, int(M), int(N), int(K), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

template <typename T>
T exp_t(T x) {
  if constexpr (std::is_same_v<T, float>) return fast::exp_f32(x);
  else return std::exp(x);
}

struct Dims {
  int64_t B, H, Lq, Lk, dh;
};

Dims check_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, const Tensor& kp,
                const AttentionBuckets& bk, const char* op) {
  check_defined(q, op, "q");
  check_same_dtype_device(q, k, op);
  check_same_dtype_device(q, v, op);
  RELPOS_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "{}: q, k, v must be [B, H, L, dh], got {}, {}, {}", op,
               shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
  Dims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
  RELPOS_CHECK(k.size(0) == d.B && k.size(1) == d.H && k.size(3) == d.dh && v.shape() == k.shape(),
               "{}: k {} and v {} must be [B, H, Lk, dh] = [{}, {}, Lk, {}] for q {}", op, shape_str(k.shape()),
               shape_str(v.shape()), d.B, d.H, d.dh, shape_str(q.shape()));
  if (bias.defined()) {
    check_same_dtype_device(q, bias, op);
    RELPOS_CHECK(bias.dim() == 2 && bias.size(0) == d.H && bias.size(1) == d.Lq + d.Lk - 1,
                 "{}: bias must be [H, Lq + Lk - 1] = [{}, {}], got {}", op, d.H, d.Lq + d.Lk - 1,
                 shape_str(bias.shape()));
  }
  if (kp.defined())
    RELPOS_CHECK(kp.dim() == 2 && kp.size(0) == d.B && kp.size(1) == d.Lk,
                 "{}: key padding must be [B, Lk] = [{}, {}], got {}", op, d.B, d.Lk, describe(kp));
  RELPOS_CHECK(bk.qr.defined() == bk.bucket.defined(), "{}: bucket terms need both qr and bucket", op);
  if (bk.qr.defined()) {
    check_same_dtype_device(q, bk.qr, op);
    RELPOS_CHECK(bk.qr.dim() == 4 && bk.qr.size(0) == d.B && bk.qr.size(1) == d.H && bk.qr.size(2) == d.Lq &&
                     bk.qr.size(3) >= 1,
                 "{}: qr must be [B, H, Lq, NB] = [{}, {}, {}, NB], got {}", op, d.B, d.H, d.Lq,
                 shape_str(bk.qr.shape()));
    RELPOS_CHECK(bk.bucket.dtype() == DType::I64 && bk.bucket.dim() == 1 && bk.bucket.size(0) == d.Lq + d.Lk - 1,
                 "{}: bucket must be int64 [Lq + Lk - 1] = [{}], got {}", op, d.Lq + d.Lk - 1, describe(bk.bucket));
  }
  return d;
}

// The bucket index as checked host integers (every entry in [0, NB)).
std::vector<int64_t> bucket_index(const AttentionBuckets& bk, const char* op) {
  if (!bk.bucket.defined()) return {};
  std::vector<int64_t> idx = bk.bucket.to_vector<int64_t>();
  const int64_t nb = bk.qr.size(3);
  for (size_t t = 0; t < idx.size(); ++t)
    RELPOS_CHECK(idx[t] >= 0 && idx[t] < nb, "{}: bucket[{}] = {} is outside [0, {})", op, t, idx[t], nb);
  return idx;
}

// The scores of rows i0 .. i0+r-1 against keys 0 .. kend-1, biased and masked, into s
// [r, kend] (row stride kend). Returns nothing; hidden cells are -inf.
template <typename T>
void block_scores(const Dims& d, const AttentionArgs& a, const T* Q, const T* K, const T* th, const double* kp_b,
                  const T* qr, int64_t nb, const int64_t* bucket, int64_t i0, int64_t r, int64_t kend, T* s) {
  gemm<T>(CblasNoTrans, CblasTrans, r, kend, d.dh, T(a.scale), Q + i0 * d.dh, d.dh, K, d.dh, T(0), s, kend);
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  for (int64_t ii = 0; ii < r; ++ii) {
    const int64_t i = i0 + ii;
    T* si = s + ii * kend;
    if (th) {
      const T* row_bias = th + (d.Lq - 1 - i);  // row_bias[j] = T[h, j - i + Lq - 1]
#pragma omp simd
      for (int64_t j = 0; j < kend; ++j) si[j] += row_bias[j];
    }
    if (qr) {  // bucketed score term, scaled like q k^T
      const T* qri = qr + i * nb;
      const int64_t* row_bucket = bucket + (d.Lq - 1 - i);
      const T sc = T(a.scale);
      for (int64_t j = 0; j < kend; ++j) si[j] += sc * qri[row_bucket[j]];
    }
    if (a.causal) {
      const int64_t visible = std::clamp<int64_t>(a.q_offset + i - a.k_offset + 1, 0, kend);
      std::fill(si + visible, si + kend, kNegInf);
    }
    if (kp_b)
      for (int64_t j = 0; j < kend; ++j)
        if (kp_b[j] != 0.0) si[j] = kNegInf;
  }
}

// Keys visible to any row of the block (all keys without a causal mask).
int64_t block_key_end(const Dims& d, const AttentionArgs& a, int64_t i0, int64_t r) {
  if (!a.causal) return d.Lk;
  return std::clamp<int64_t>(a.q_offset + (i0 + r - 1) - a.k_offset + 1, 0, d.Lk);
}

// The dropout multipliers of cells j < kend of global row `row` (b H + h) Lq + i: the
// draws k::dropout_mask makes for element row * Lk + j of a [B, H, Lq, Lk] tensor.
template <typename T>
void dropout_row(const AttentionArgs& a, int64_t Lk, int64_t row, int64_t kend, T* m) {
  const T keep = T(1.0 / (1.0 - a.dropout_p));
  const uint64_t base = a.dropout_first + uint64_t(row) * uint64_t(Lk);
  for (int64_t j = 0; j < kend; ++j) m[j] = rng_uniform(a.dropout_seed, base + uint64_t(j)) < a.dropout_p ? T(0) : keep;
}

std::vector<double> padding_rows(const Tensor& kp) {
  return kp.defined() ? kp.to_vector<double>() : std::vector<double>{};
}

}  // namespace

AttentionOut attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& bias_in,
                       const Tensor& kp, const AttentionArgs& a, const AttentionBuckets& bk) {
  const Dims d = check_args(q_in, k_in, v_in, bias_in, kp, bk, "attention");
  RELPOS_CHECK(a.dropout_p >= 0.0 && a.dropout_p < 1.0, "attention: dropout p must be in [0, 1), got {}", a.dropout_p);
  const std::vector<int64_t> bucket = bucket_index(bk, "attention");
  const Tensor qr_t = bk.qr.defined() ? bk.qr.contiguous() : Tensor();
  const int64_t nb = qr_t.defined() ? qr_t.size(3) : 0;
  const Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  const Tensor bias = bias_in.defined() ? bias_in.contiguous() : Tensor();
  const std::vector<double> pad = padding_rows(kp);
  AttentionOut out{Tensor::empty({d.B, d.H, d.Lq, d.dh}, q.dtype()), Tensor::empty({d.B, d.H, d.Lq}, q.dtype())};
  if (a.row_stats) {
    out.max_abs = Tensor::empty({d.B, d.H, d.Lq}, q.dtype());
    out.entropy = Tensor::empty({d.B, d.H, d.Lq}, q.dtype());
  }
  if (nb > 0) out.w = Tensor::zeros({d.B, d.H, d.Lq, nb}, q.dtype());
  visit_float(q.dtype(), "attention", [&]<typename T>() {
    const T *pq = q.data<T>(), *pk = k.data<T>(), *pv = v.data<T>();
    const T* pt = bias.defined() ? bias.data<T>() : nullptr;
    T *po = out.o.data<T>(), *pl = out.lse.data<T>();
    T* pmax = a.row_stats ? out.max_abs.data<T>() : nullptr;
    T* pent = a.row_stats ? out.entropy.data<T>() : nullptr;
    const T* pqr = nb > 0 ? qr_t.data<T>() : nullptr;
    T* pw = nb > 0 ? out.w.data<T>() : nullptr;
#pragma omp parallel
    {
      std::vector<T> s(size_t(kRowBlock * std::max<int64_t>(d.Lk, 1))), mrow(size_t(std::max<int64_t>(d.Lk, 1)));
#pragma omp for schedule(static)
      for (int64_t bh = 0; bh < d.B * d.H; ++bh) {
        const int64_t b = bh / d.H, h = bh % d.H;
        const T* Q = pq + bh * d.Lq * d.dh;
        const T* K = pk + bh * d.Lk * d.dh;
        const T* V = pv + bh * d.Lk * d.dh;
        const T* th = pt ? pt + h * (d.Lq + d.Lk - 1) : nullptr;
        const double* kp_b = pad.empty() ? nullptr : pad.data() + b * d.Lk;
        T* O = po + bh * d.Lq * d.dh;
        T* lse = pl + bh * d.Lq;
        const T* QR = pqr ? pqr + bh * d.Lq * nb : nullptr;
        T* W = pw ? pw + bh * d.Lq * nb : nullptr;
        for (int64_t i0 = 0; i0 < d.Lq; i0 += kRowBlock) {
          const int64_t r = std::min(kRowBlock, d.Lq - i0), kend = block_key_end(d, a, i0, r);
          if (kend > 0) block_scores<T>(d, a, Q, K, th, kp_b, QR, nb, bucket.data(), i0, r, kend, s.data());
          for (int64_t ii = 0; ii < r; ++ii) {  // softmax of each row, in place
            T* si = s.data() + ii * kend;
            const int64_t row = bh * d.Lq + i0 + ii;
            T m = -std::numeric_limits<T>::infinity();
            for (int64_t j = 0; j < kend; ++j) m = si[j] > m ? si[j] : m;
            if (kend == 0 || (std::isinf(m) && m < 0)) {  // no visible key: p = 0, o = 0
              std::fill(si, si + kend, T(0));
              lse[i0 + ii] = -std::numeric_limits<T>::infinity();
              if (pmax) pmax[row] = pent[row] = T(0);
              continue;
            }
            T sum = 0, ps = 0;  // ps = sum_j e_j (S_ij - m) (row_stats only)
            if (pmax) {
              T mabs = 0;
              for (int64_t j = 0; j < kend; ++j) {
                const T x = si[j];
                if (std::isinf(x)) {  // hidden key (-inf)
                  si[j] = T(0);
                  continue;
                }
                mabs = std::max(mabs, std::abs(x));
                const T z = x - m, e = exp_t<T>(z);
                si[j] = e;
                sum += e;
                ps += e * z;
              }
              pmax[row] = mabs;
            } else {
#pragma omp simd reduction(+ : sum)
              for (int64_t j = 0; j < kend; ++j) {
                const T e = exp_t<T>(si[j] - m);
                si[j] = e;
                sum += e;
              }
            }
            const T inv = T(1) / sum;
#pragma omp simd
            for (int64_t j = 0; j < kend; ++j) si[j] *= inv;
            lse[i0 + ii] = m + std::log(sum);
            if (a.dropout_p > 0) {  // P' = P * M (lse and the monitors stay those of P)
              dropout_row<T>(a, d.Lk, row, kend, mrow.data());
              for (int64_t j = 0; j < kend; ++j) si[j] *= mrow[size_t(j)];
            }
            if (W) {  // P summed per bucket
              T* wi = W + (i0 + ii) * nb;
              const int64_t* row_bucket = bucket.data() + (d.Lq - 1 - (i0 + ii));
              for (int64_t j = 0; j < kend; ++j) wi[row_bucket[j]] += si[j];
            }
            if (pent) pent[row] = std::log(sum) - ps * inv;  // -sum P log P, P = e / sum
          }
          if (kend > 0)
            gemm<T>(CblasNoTrans, CblasNoTrans, r, d.dh, kend, T(1), s.data(), kend, V, d.dh, T(0), O + i0 * d.dh,
                    d.dh);
          else
            std::fill(O + i0 * d.dh, O + (i0 + r) * d.dh, T(0));
        }
      }
    }
  });
  return out;
}

AttentionGrads attention_backward(const Tensor& g_in, const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                  const Tensor& bias_in, const Tensor& kp, const AttentionOut& fwd,
                                  const AttentionArgs& a, const AttentionBuckets& bk, const Tensor& gw_in) {
  const Dims d = check_args(q_in, k_in, v_in, bias_in, kp, bk, "attention_backward");
  const std::vector<int64_t> bucket = bucket_index(bk, "attention_backward");
  const Tensor qr_t = bk.qr.defined() ? bk.qr.contiguous() : Tensor();
  const int64_t nb = qr_t.defined() ? qr_t.size(3) : 0;
  RELPOS_CHECK(nb == 0 || (fwd.w.defined() && fwd.w.shape() == qr_t.shape()),
               "attention_backward: the saved forward has no bucket sums w matching qr {}", describe(qr_t));
  RELPOS_CHECK(!gw_in.defined() || (nb > 0 && gw_in.shape() == qr_t.shape()),
               "attention_backward: the gradient of w {} must be [B, H, Lq, NB] like qr {}", describe(gw_in),
               describe(qr_t));
  const Tensor gw = gw_in.defined() ? gw_in.contiguous() : Tensor();
  const Tensor w_t = nb > 0 ? fwd.w.contiguous() : Tensor();
  RELPOS_CHECK(g_in.shape() == fwd.o.shape() && fwd.lse.defined() && fwd.lse.numel() == d.B * d.H * d.Lq,
               "attention_backward: gradient {} / saved output {} do not match q {}", describe(g_in), describe(fwd.o),
               describe(q_in));
  const Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous(), g = g_in.contiguous();
  const Tensor o = fwd.o.contiguous(), lse_t = fwd.lse.contiguous();
  const Tensor bias = bias_in.defined() ? bias_in.contiguous() : Tensor();
  const std::vector<double> pad = padding_rows(kp);
  const int64_t nt = d.Lq + d.Lk - 1;
  AttentionGrads out{Tensor::empty(q.shape(), q.dtype()), Tensor::zeros(k.shape(), q.dtype()),
                     Tensor::zeros(v.shape(), q.dtype()), Tensor(), Tensor()};
  if (nb > 0) out.dqr = Tensor::zeros(qr_t.shape(), q.dtype());
  std::vector<double> dbias_parts(bias.defined() ? size_t(d.B * d.H * nt) : 0, 0.0);  // [B, H, nt]
  visit_float(q.dtype(), "attention_backward", [&]<typename T>() {
    const T *pq = q.data<T>(), *pk = k.data<T>(), *pv = v.data<T>(), *pg = g.data<T>(), *po = o.data<T>();
    const T* pl = lse_t.data<T>();
    const T* pt = bias.defined() ? bias.data<T>() : nullptr;
    T *dq = out.dq.data<T>(), *dk = out.dk.data<T>(), *dv = out.dv.data<T>();
    const T* pqr = nb > 0 ? qr_t.data<T>() : nullptr;
    const T* pw = nb > 0 ? w_t.data<T>() : nullptr;
    const T* pgw = gw.defined() ? gw.data<T>() : nullptr;
    T* pdqr = nb > 0 ? out.dqr.data<T>() : nullptr;
#pragma omp parallel
    {
      const size_t blk = size_t(kRowBlock * std::max<int64_t>(d.Lk, 1));
      std::vector<T> p(blk), ds(blk), delta(static_cast<size_t>(kRowBlock)), mrow(size_t(std::max<int64_t>(d.Lk, 1)));
#pragma omp for schedule(static)
      for (int64_t bh = 0; bh < d.B * d.H; ++bh) {
        const int64_t b = bh / d.H, h = bh % d.H;
        const T* Q = pq + bh * d.Lq * d.dh;
        const T* K = pk + bh * d.Lk * d.dh;
        const T* V = pv + bh * d.Lk * d.dh;
        const T* G = pg + bh * d.Lq * d.dh;
        const T* O = po + bh * d.Lq * d.dh;
        const T* lse = pl + bh * d.Lq;
        const T* th = pt ? pt + h * nt : nullptr;
        const double* kp_b = pad.empty() ? nullptr : pad.data() + b * d.Lk;
        T *dQ = dq + bh * d.Lq * d.dh, *dK = dk + bh * d.Lk * d.dh, *dV = dv + bh * d.Lk * d.dh;
        double* dT = dbias_parts.empty() ? nullptr : dbias_parts.data() + bh * nt;
        const T* QR = pqr ? pqr + bh * d.Lq * nb : nullptr;
        const T* Wb = pw ? pw + bh * d.Lq * nb : nullptr;
        const T* GW = pgw ? pgw + bh * d.Lq * nb : nullptr;
        T* dQR = pdqr ? pdqr + bh * d.Lq * nb : nullptr;
        for (int64_t i0 = 0; i0 < d.Lq; i0 += kRowBlock) {
          const int64_t r = std::min(kRowBlock, d.Lq - i0), kend = block_key_end(d, a, i0, r);
          if (kend == 0) {
            std::fill(dQ + i0 * d.dh, dQ + (i0 + r) * d.dh, T(0));
            continue;
          }
          block_scores<T>(d, a, Q, K, th, kp_b, QR, nb, bucket.data(), i0, r, kend, p.data());
          for (int64_t ii = 0; ii < r; ++ii) {  // P = exp(S - lse); D = rowsum(dO * O)
            T* pi = p.data() + ii * kend;
            const T l = lse[i0 + ii];
            if (std::isinf(l) && l < 0) {
              std::fill(pi, pi + kend, T(0));
            } else {
#pragma omp simd
              for (int64_t j = 0; j < kend; ++j) pi[j] = exp_t<T>(pi[j] - l);
            }
            const T* gi = G + (i0 + ii) * d.dh;
            const T* oi = O + (i0 + ii) * d.dh;
            T acc = 0;
            for (int64_t c = 0; c < d.dh; ++c) acc += gi[c] * oi[c];
            if (GW)  // the bucket output's share: sum_n g_w[i, n] w[i, n]
              for (int64_t n = 0; n < nb; ++n) acc += GW[(i0 + ii) * nb + n] * Wb[(i0 + ii) * nb + n];
            delta[size_t(ii)] = acc;
          }
          // dP = dO_blk V^T  [r, kend]
          gemm<T>(CblasNoTrans, CblasTrans, r, kend, d.dh, T(1), G + i0 * d.dh, d.dh, V, d.dh, T(0), ds.data(), kend);
          for (int64_t ii = 0; ii < r; ++ii) {  // dS = P (dP - D)
            T* di = ds.data() + ii * kend;
            T* pi = p.data() + ii * kend;
            const T dl = delta[size_t(ii)];
            const int64_t* row_bucket = nb > 0 ? bucket.data() + (d.Lq - 1 - (i0 + ii)) : nullptr;
            if (GW) {  // dP'_ij += g_w[i, n(i, j)]
              const T* gwi = GW + (i0 + ii) * nb;
              for (int64_t j = 0; j < kend; ++j) di[j] += gwi[row_bucket[j]];
            }
            if (a.dropout_p > 0) {  // dP = M dP'
              dropout_row<T>(a, d.Lk, bh * d.Lq + i0 + ii, kend, mrow.data());
              for (int64_t j = 0; j < kend; ++j) di[j] *= mrow[size_t(j)];
            }
#pragma omp simd
            for (int64_t j = 0; j < kend; ++j) di[j] = pi[j] * (di[j] - dl);
            if (dQR) {  // dqr[i, n] = scale sum_{j in bucket n} dS_ij
              T* dqri = dQR + (i0 + ii) * nb;
              const T sc = T(a.scale);
              for (int64_t j = 0; j < kend; ++j) dqri[row_bucket[j]] += sc * di[j];
            }
            if (a.dropout_p > 0)  // P' for dV
              for (int64_t j = 0; j < kend; ++j) pi[j] *= mrow[size_t(j)];
            if (dT) {
              double* diag = dT + (d.Lq - 1 - (i0 + ii));  // diag[j] accumulates T[h, j - i + Lq - 1]
              for (int64_t j = 0; j < kend; ++j) diag[j] += double(di[j]);
            }
          }
          // dQ_blk = scale dS K;  dK += scale dS^T Q_blk;  dV += P^T dO_blk
          gemm<T>(CblasNoTrans, CblasNoTrans, r, d.dh, kend, T(a.scale), ds.data(), kend, K, d.dh, T(0),
                  dQ + i0 * d.dh, d.dh);
          gemm<T>(CblasTrans, CblasNoTrans, kend, d.dh, r, T(a.scale), ds.data(), kend, Q + i0 * d.dh, d.dh, T(1), dK,
                  d.dh);
          gemm<T>(CblasTrans, CblasNoTrans, kend, d.dh, r, T(1), p.data(), kend, G + i0 * d.dh, d.dh, T(1), dV, d.dh);
        }
      }
    }
    if (bias.defined()) {  // dT[h] = sum over b, in order
      out.dbias = Tensor::empty({d.H, nt}, q.dtype());
      T* pdb = out.dbias.data<T>();
      for (int64_t h = 0; h < d.H; ++h)
        for (int64_t t = 0; t < nt; ++t) {
          double acc = 0;
          for (int64_t b = 0; b < d.B; ++b) acc += dbias_parts[size_t((b * d.H + h) * nt + t)];
          pdb[h * nt + t] = T(acc);
        }
    }
  });
  return out;
}

}  // namespace relpos::k::cpu
