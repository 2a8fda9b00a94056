// kernels/ops.h — raw tensor computations (no autograd): the public, documented list of ops.
// The ops a backend implements are the lines of kernels/op_table.inc (k::Op and k::supports()
// in kernels/op_table.h come from it); each is a dispatch point (kernels/dispatch.cpp,
// generated from the table): it checks that all tensor inputs sit on one device (else an
// error naming the op and both devices), checks shapes and dtypes once (kernels/checks.cpp)
// and forwards to that device's backend, kernels/cpu/ or kernels/cuda/. A few entries
// (masked_fill, sum_to, cat, split) are compositions of other ops and work on every device
// as they are. Outputs live on the inputs' device. Shapes are in the comments.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "kernels/op_table.h"

namespace relpos::k {

// ---------------------------------------------------------------- elementwise
enum class Unary {
  Neg,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Abs,
  Sign,
  Tanh,
  Sigmoid,
  Relu,
  GeluTanh,
  GeluErf,
  Silu,
  Floor,
  Ceil,
  // derivatives used by backward passes
  ReluGrad,          // x > 0
  GeluTanhGrad,      // d/dx gelu_tanh(x)
  GeluErfGrad,       // d/dx gelu_erf(x)
  SiluGrad,          // d/dx silu(x)
  TanhGradFromY,     // 1 - y^2
  SigmoidGradFromY,  // y (1 - y)
  // with scalar parameters p, q
  AddScalar,   // x + p
  MulScalar,   // x * p
  PowScalar,   // x ^ p
  RPowScalar,  // p ^ x
  Clamp,       // min(max(x, p), q)
  ClampMask,   // 1 where p <= x <= q else 0 (clamp backward)
  // the nearest bfloat16 / float16 value (ties to even; float16: ±inf from 65520), in x's
  // dtype (mixed-precision emulation, core/float16.h)
  RoundBF16,
  RoundFP16,
};
Tensor unary(Unary op, const Tensor& x, double p = 0.0, double q = 0.0);  // out: x.shape
// Fused backward of a pointwise op: g * deriv(x) in one pass (g, x: same shape).
Tensor unary_grad(Unary deriv, const Tensor& g, const Tensor& x, double p = 0.0, double q = 0.0);

enum class Binary { Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge };
// a, b broadcast together; comparisons return 1/0 in the operands' dtype.
Tensor binary(Binary op, const Tensor& a, const Tensor& b);
inline Tensor add(const Tensor& a, const Tensor& b) { return binary(Binary::Add, a, b); }
inline Tensor sub(const Tensor& a, const Tensor& b) { return binary(Binary::Sub, a, b); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return binary(Binary::Mul, a, b); }
inline Tensor div(const Tensor& a, const Tensor& b) { return binary(Binary::Div, a, b); }
// out = cond != 0 ? a : b, all three broadcast together (cond may have another dtype).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// out = mask != 0 ? value : x; mask broadcasts to x.shape.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// x: [..., Lq, Lk] -> x with every cell where key position k_offset + j lies after query
// position q_offset + i set to value (the causal mask as a predicate; no [Lq, Lk] mask).
Tensor causal_fill(const Tensor& x, int64_t q_offset, int64_t k_offset, double value);
// dst += alpha * src (src broadcast to dst.shape); bumps dst's version.
void add_(const Tensor& dst, const Tensor& src, double alpha = 1.0);
// dst *= s; bumps dst's version.
void mul_(const Tensor& dst, double s);

// ---------------------------------------------------------------- reductions
enum class Reduce { Sum, Mean, Max, Min, LogSumExp, Var };
// Reduce over `dims` (empty = all dims). Var uses `correction` (1 = unbiased).
Tensor reduce(Reduce op, const Tensor& x, std::vector<int64_t> dims, bool keepdim,
              int64_t correction = 1);
inline Tensor sum(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false) {
  return reduce(Reduce::Sum, x, std::move(dims), keepdim);
}
// sum(x * x) over every element, accumulated in float64: a 0-d float64 tensor on x's device
// (global gradient norms and the non-finite check: any NaN/Inf makes it non-finite).
Tensor sum_squares(const Tensor& x);
// Sum x over the dims that broadcasting expanded, so the result has `shape`.
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---------------------------------------------------------------- linear algebra
// How matmul multiplies float32 operands. F32: as they are. BF16 / FP16: rounded to bfloat16 /
// float16 first (nearest even; autocast, autograd/autocast.h), then multiplied with float32
// accumulation — on the backend's 16-bit units where it has them (the CPU for BF16 with
// AVX512-BF16 / AMX, kernels/cpu/gemm.h; CUDA tensor cores), else on rounded float32 copies:
// the same products, summed in another order.
enum class GemmInputs { F32, BF16, FP16 };
// a: [..., M, K], b: [..., K, N] -> [..., M, N]; batch dims broadcast. Transposed views are
// handed to BLAS with transpose flags, not copied. round_output (BF16 / FP16 inputs only): the
// float32 result is rounded to the inputs' 16-bit format (nearest even), as a 16-bit GEMM's
// output would be — the same values as k::unary(RoundBF16 / RoundFP16) of the result, without
// the extra pass over memory (the CPU rounds each block of rows while it is in cache).
// bias ([N], a's dtype; undefined = none): added to every row of the result after the rounding
// (a linear layer's x W^T + b; the add is float32 arithmetic under autocast, as it was as a
// separate op) — the values of k::add(matmul(a, b, ...), bias), without the pass over memory
// (the CPU adds it to each block of rows while it is in cache).
Tensor matmul(const Tensor& a, const Tensor& b, GemmInputs inputs = GemmInputs::F32, bool round_output = false,
              const Tensor& bias = {});

// The activations a GEMM can apply in its epilogue (matmul_act), each with the Unary op of its
// derivative in x — the one table of these pairs (autograd's relu / gelu / silu use it too).
constexpr bool is_activation(Unary act) {
  return act == Unary::Relu || act == Unary::GeluErf || act == Unary::GeluTanh || act == Unary::Silu;
}
constexpr Unary derivative_of(Unary act) {
  switch (act) {
    case Unary::Relu:
      return Unary::ReluGrad;
    case Unary::GeluErf:
      return Unary::GeluErfGrad;
    case Unary::GeluTanh:
      return Unary::GeluTanhGrad;
    case Unary::Silu:
      return Unary::SiluGrad;
    default:
      return act;  // not an activation (is_activation): refused by matmul_act's check
  }
}
struct MatmulActOut {
  Tensor y;         // act(pre), pre = matmul(a, b, inputs, round_output, bias)
  Tensor act_grad;  // act'(pre), y's shape; undefined unless want_grad
};
// A linear layer and its activation in one op: matmul with the same rounding and bias, then
// act (is_activation) applied to each block of rows while it is in cache, with act'(pre) saved
// for the backward when want_grad — the values of k::unary(act, pre) and
// k::unary(derivative_of(act), pre) without the passes over memory or keeping pre (cuBLASLt's
// GELU_AUX epilogue keeps pre instead; keeping act' makes the backward one multiply).
MatmulActOut matmul_act(const Tensor& a, const Tensor& b, GemmInputs inputs, bool round_output, const Tensor& bias,
                        Unary act, bool want_grad);
// matmul(a, b, inputs, round_output) multiplied elementwise by m (the result's shape and dtype)
// after the rounding: the values of k::mul(matmul(a, b, inputs, round_output), m) without the
// pass over memory (the CPU multiplies each block of rows while it is in cache). The backward of
// a linear layer through the activation of the layer before it: g_pre = (g W) act'(pre)
// (autograd's mlp).
Tensor matmul_mul(const Tensor& a, const Tensor& b, GemmInputs inputs, bool round_output, const Tensor& m);
// matmul(a, b, inputs, round_output, bias) plus r (the result's shape and dtype), added last in
// float32: the values of k::add(matmul(a, b, inputs, round_output, bias), r) without the pass over
// memory (the CPU adds each block of rows while it is in cache). A residual connection around a
// linear layer: x + (h W^T + b) (autograd's linear and mlp with a residual).
Tensor matmul_add(const Tensor& a, const Tensor& b, GemmInputs inputs, bool round_output, const Tensor& bias,
                  const Tensor& r);
struct MatmulSumsOut {
  Tensor y;       // matmul(a, b, inputs, round_output)
  Tensor a_sums;  // [M]: a summed along its last dim (K)
};
// A 2-D product and the sums of a's rows along K: y = matmul(a, b, inputs, round_output),
// a_sums[m] = sum_k a[m, k] — of a's own values (not rounded to 16 bits under autocast),
// accumulated in float64 and rounded once to a's dtype: k::sum_to(a.transpose(0, 1), {M})'s
// value up to the order of the float64 additions. A linear layer's weight and bias gradients
// from one read of g: dW = g^T x, db = the sums of g^T (the CPU sums each K chunk of a while
// the thread that multiplies it has it in cache, kernels/cpu/gemm.h).
MatmulSumsOut matmul_sums(const Tensor& a, const Tensor& b, GemmInputs inputs, bool round_output);

// ---------------------------------------------------------------- softmax family
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor softmax_backward(const Tensor& y, const Tensor& gy, int64_t dim);      // y = softmax(x)
Tensor log_softmax_backward(const Tensor& y, const Tensor& gy, int64_t dim);  // y = log_softmax(x)

// ---------------------------------------------------------------- normalization
struct NormOut {
  Tensor y;     // x.shape
  Tensor mean;  // x.shape[:-1] (layer_norm only)
  Tensor rstd;  // x.shape[:-1]
};
// Normalise over the last dim; weight/bias: [D] or undefined.
NormOut layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
NormOut rms_norm(const Tensor& x, const Tensor& weight, double eps);
struct NormGrads {
  Tensor dx, dweight, dbias;  // dweight/dbias undefined when weight/bias were
};
NormGrads layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean,
                              const Tensor& rstd, const Tensor& weight, bool has_bias);
NormGrads rms_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& rstd,
                            const Tensor& weight);

// ---------------------------------------------------------------- indexing
// weight: [V, D], idx: int64 [...] -> [..., D]
Tensor embedding(const Tensor& weight, const Tensor& idx);
// gy: [..., D], idx: int64 [...] -> [num_rows, D] (scatter-add, deterministic)
Tensor embedding_backward(const Tensor& gy, const Tensor& idx, int64_t num_rows);
// x: [..., n, ...] (n at dim), idx: int64 [m] -> [..., m, ...]
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& idx);
// zeros(shape) with src rows added at idx along dim (index_select backward)
Tensor index_add(const Shape& shape, int64_t dim, const Tensor& idx, const Tensor& src);
// out[i][j] = x[i][idx[i][j]] (for dim 1); idx has x's rank, and idx.shape <= x.shape elsewhere
Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx);
// zeros(shape) with out[i][idx[i][j]] += src[i][j] (gather backward)
Tensor scatter_add(const Shape& shape, int64_t dim, const Tensor& idx, const Tensor& src);

// ---------------------------------------------------------------- Toeplitz (distance-only) bias
// s: [B, H, Lq, Lk], t: [H, Lq + Lk - 1] -> s + t[h, j - i + Lq - 1]  (no [H, Lq, Lk] bias)
Tensor toeplitz_add(const Tensor& s, const Tensor& t);
// ds: [B, H, Lq, Lk] -> [H, Lq + Lk - 1], sums along each diagonal (deterministic)
Tensor toeplitz_diag_sum(const Tensor& ds);

// ---------------------------------------------------------------- depthwise 2D convolution
// x [B, H, W, C] (channels last: a token grid [B, H*W, C] viewed as rows x columns), w [C, k, k]
// (k odd), bias [C] or undefined -> y [B, H, W, C], PyTorch's Conv2d(C, C, k, padding=k/2,
// groups=C) in channels-last layout (cross-correlation, zero padding, p = (k - 1) / 2):
//   y[b, i, j, c] = bias[c] + sum_{u, v < k} w[c, u, v] * x[b, i + u - p, j + v - p, c]
Tensor depthwise_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias);
struct ConvGrads {
  Tensor dx, dw, dbias;  // [B, H, W, C], [C, k, k], [C] (dbias undefined without a bias)
};
// gy [B, H, W, C] -> the gradients of depthwise_conv2d (dw and dbias summed in float64, in a
// fixed order: deterministic, the same bits on every backend):
//   dx[b, i, j, c] = sum_{u, v} w[c, u, v] * gy[b, i - u + p, j - v + p, c]
//   dw[c, u, v]    = sum_{b, i, j} gy[b, i, j, c] * x[b, i + u - p, j + v - p, c]
//   dbias[c]       = sum_{b, i, j} gy[b, i, j, c]
ConvGrads depthwise_conv2d_backward(const Tensor& gy, const Tensor& x, const Tensor& w, bool has_bias);

// ---------------------------------------------------------------- rotary position encoding
// x [..., L, dh], cs [2, L, r/2] (cs[0] = cos, cs[1] = sin of every position's pair angles, any
// scale folded in; r <= dh): the first r channels of each row rotated pairwise, the rest copied:
//   (a, b) -> (a cos - b sin, a sin + b cos),  pairs (p, p + r/2) (half) or (2p, 2p + 1) (interleaved).
// inverse: the transposed map, (a, b) -> (a cos + b sin, -a sin + b cos), which is the backward.
Tensor rotary(const Tensor& x, const Tensor& cs, bool interleaved, bool inverse);

// ---------------------------------------------------------------- fused attention
// O = softmax(scale * Q K^T + bias + masks) V without materialising [B, H, Lq, Lk]: per
// (batch, head) and block of query rows, the scores of that block only (O(L) memory), keys
// past the causal limit never computed. bias: Toeplitz [H, Lq + Lk - 1] as toeplitz_add
// (undefined = none); key_padding: [B, Lk], nonzero = hidden (undefined = none).
struct AttentionArgs {
  double scale = 1.0;
  bool causal = false;
  int64_t q_offset = 0, k_offset = 0;  // absolute positions of query row 0 / key column 0
  bool row_stats = false;              // also fill AttentionOut::max_abs and ::entropy (monitors)
  // Dropout on P (0 = none): cell (b, h, i, j) is dropped when rng_uniform(dropout_seed,
  // dropout_first + ((b H + h) Lq + i) Lk + j) < dropout_p, kept cells scaled by 1 / (1 - p):
  // the mask k::dropout_mask draws for a [B, H, Lq, Lk] tensor after Generator::advance, so
  // the fused and the materialised paths drop the same cells; backward regenerates it.
  double dropout_p = 0.0;
  uint64_t dropout_seed = 0, dropout_first = 0;
  // Autocast (float32 tensors only): BF16 / FP16 takes q, k, v — and in backward dO — as their
  // nearest 16-bit values (rounded as the kernel reads them) and rounds dq, dk, dv as it writes
  // them; round_output also rounds o (then the backward's D_i = dO_i . O_i uses the rounded o,
  // as a 16-bit FlashAttention's stored output would be). S, the bias, the softmax statistics
  // and the accumulators stay float32. The values of rounding the tensors around the kernel,
  // without the passes over memory.
  GemmInputs inputs = GemmInputs::F32;
  bool round_output = false;
  // Autocast (float32 only): BF16 / FP16 rounds the probabilities P' (forward: E' = exp(S - m)
  // times the dropout mask) and dS to this format right before the products they enter
  // (O += P' V; dV += P'^T dO, dQ += scale dS K, dK += scale dS^T Q), as FlashAttention and
  // PyTorch's CPU flash attention multiply a 16-bit P; the softmax sums l, D, the bucket sums
  // and the bias gradients use the float32 values. With inputs BF16 too these products run on
  // bf16 pairs (kernels/cpu/tile_gemm.h) with the float32 tiles' bits.
  GemmInputs probs = GemmInputs::F32;
};
struct AttentionOut {
  Tensor o;    // [B, H, Lq, dh]
  Tensor lse;  // [B, H, Lq] logsumexp of each score row (-inf: no visible key, o = 0)
  // Only with row_stats, [B, H, Lq], 0 for a row without a visible key; computed while the
  // row is in cache, no extra pass over the scores:
  Tensor max_abs;  // max |S_ij| over the visible keys j
  Tensor entropy;  // -sum_j P_ij log P_ij = lse_i - sum_j P_ij S_ij
  Tensor w;        // [B, H, Lq, NB] with buckets: P summed per bucket
};
// Bucketed content terms (Shaw's relative keys and values; undefined = none), O(L k) memory:
// the bucket of cell (i, j) is bucket[j - i + Lq - 1] (Toeplitz-indexed like the bias), and
//   S_ij += scale * qr[b, h, i, bucket(i, j)]          (qr = q R_k^T, computed by the caller)
//   w[b, h, i, n] = sum_j P_ij [bucket(i, j) = n]      (the caller adds w R_v to the output)
struct AttentionBuckets {
  Tensor qr;      // [B, H, Lq, NB], q's dtype
  Tensor bucket;  // int64 [Lq + Lk - 1], values in [0, NB)
};
// Index-driven bias (Swin 2D relative bias, Graphormer spatial encoding; undefined = none):
// a gathered table instead of a Toeplitz one, added with the Toeplitz bias, before the
// causal/padding masks:
//   S_ij += table[index[(b,) i, j], h]
// index is shared by the batch ([Lq, Lk]) or per example ([B, Lq, Lk]); every value must be a
// table row (checked on the host, once per call).
struct AttentionIndexBias {
  Tensor table;  // [NT, H], q's dtype
  Tensor index;  // int64 [Lq, Lk] or [B, Lq, Lk], values in [0, NT)
};
// q: [B, H, Lq, dh], k, v: [B, H, Lk, dh]; with buckets, AttentionOut::w is filled.
AttentionOut attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                       const Tensor& key_padding, const AttentionArgs& a, const AttentionBuckets& buckets = {},
                       const AttentionIndexBias& index_bias = {});
struct AttentionGrads {
  Tensor dq, dk, dv, dbias;  // dbias undefined when bias was
  Tensor dqr;                // [B, H, Lq, NB] with buckets
  Tensor dtable;             // [NT, H] with an index bias
};
// Recomputes the scores block by block; dbias sums each diagonal, dtable each table row's
// cells, over batches in a fixed order (deterministic, independent of the thread count).
// g_w: the gradient of AttentionOut::w (with buckets; undefined = zero).
AttentionGrads attention_backward(const Tensor& g_o, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& bias, const Tensor& key_padding, const AttentionOut& fwd,
                                  const AttentionArgs& a, const AttentionBuckets& buckets = {},
                                  const Tensor& g_w = {}, const AttentionIndexBias& index_bias = {});

// ---------------------------------------------------------------- shape
Tensor cat(const std::vector<Tensor>& xs, int64_t dim);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);  // views

// ---------------------------------------------------------------- random
// Mask of 0 or 1/(1-p) with P(0) = p. Element i (row-major) is decided by draw number
// offset + i of gen (counter-based), so every device produces the same mask; gen's offset
// advances by numel.
Tensor dropout_mask(const Shape& shape, double p, Generator& gen, DType dtype, Device device = Device::CPU);

// ---------------------------------------------------------------- loss
enum class Reduction { Mean, Sum, None };
struct CrossEntropyOut {
  Tensor loss;   // [] for mean/sum, [N] for none
  Tensor lse;    // [N] logsumexp of each row (saved for backward)
  // Rows not equal to ignore_index. On cuda the count stays on the device (count_device,
  // int64 []) and count is -1, so the op reads nothing back; counted() reads it when needed.
  int64_t count = -1;
  Tensor count_device;
  int64_t counted() const { return count >= 0 ? count : int64_t(count_device.item()); }
};
// logits: [N, C], target: int64 [N]; rows with target == ignore_index contribute 0.
CrossEntropyOut cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                              Reduction reduction);
// g: [] (mean/sum) or [N] (none) -> dlogits [N, C]. count: the forward's (-1 on cuda: the
// backend counts the rows on the device again).
Tensor cross_entropy_backward(const Tensor& g, const Tensor& logits, const Tensor& lse,
                              const Tensor& target, int64_t ignore_index, Reduction reduction,
                              int64_t count);

// ---------------------------------------------------------------- optimizer updates
struct AdamStep {
  double lr, beta1, beta2, eps;
  double weight_decay;     // 0 = none
  bool decoupled;          // AdamW (p *= 1 - lr wd) vs Adam (g += wd p)
  double bias_correction1; // 1 - beta1^t
  double bias_correction2; // 1 - beta2^t
};
// One fused Adam/AdamW step in place on param, exp_avg, exp_avg_sq (all of param's shape,
// dtype and device; contiguous). Same arithmetic, in the same order and precision, as
// torch.optim.Adam(W)'s single-tensor path: m = b1 m + (1-b1) g; v = b2 v + ((1-b2) g) g;
// p += (-lr/bc1) m / (sqrt(v)/sqrt(bc2) + eps).
void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const AdamStep& s);

// ---------------------------------------------------------------- settings
void set_num_threads(int n);  // OpenMP and OpenBLAS
int num_threads();
// The BLAS kernel set in use (kernels/cpu/blas_core.cpp). The first call (every CPU GEMM makes
// it) switches OpenBLAS to the widest vector kernels the CPU runs when its own detection fell
// back to older ones, unless OPENBLAS_CORETYPE is set or RELPOS_BLAS_CORE=keep.
struct BlasCore {
  std::string library;  // "OpenBLAS" or "not OpenBLAS"
  std::string loaded;   // the core OpenBLAS chose when it loaded ("Prescott", "Haswell", ...)
  std::string core;     // the core in use now
  std::string note;     // why it differs from `loaded`, or why it was kept; "" otherwise
  int cpu_tier = 0;     // widest vector unit of this CPU: 3 AVX-512, 2 AVX2+FMA, 1 AVX, 0 SSE
  int core_tier() const;  // the same scale for `core`
};
const BlasCore& ensure_blas_core();
// Which library and kernel a CPU matmul of these operands runs on (kernels/cpu/gemm.cpp), e.g.
// "oneDNN 2.6.3 matmul brg:avx512_core_bf16 (bf16 x bf16 -> float32)"; for `relpos info` and
// the training log.
std::string cpu_gemm_path(GemmInputs inputs);
// The kernels behind the fused attention's float32 tile products (kernels/cpu/tile_gemm.h), e.g.
// "avx512 micro-kernels (12 x 32 blocks)"; for `relpos info` and the benchmarks.
std::string cpu_attention_tile_path();
// Whether RELPOS_OP_PROFILE=1 times every raw op of kernels/op_table.inc (kernels/dispatch.cpp:
// one table on stderr at process exit, per op and dtype, with the share of the run no op covers).
// Read once; a value other than unset, "", 0 or 1 is a named error (here, and at the first op).
bool op_profile_on();
// Forget what RELPOS_OP_PROFILE and RELPOS_GEMM_PROFILE have recorded so far; the tables printed
// at exit then cover only what runs after the call. relpos_bench_train calls it after its warmup
// steps: the first steps' page faults and first touches are not the step's cost (averaged in,
// they made fc1's GEMM 6.1 ms a call on the small model against 4.5 in the steady state, and
// LayerNorm 0.39 ms against 0.17). Nothing to do when both are off.
void restart_profiles();
// Let cuBLAS use TF32 tensor cores for float32 GEMMs (faster, ~1e-3 relative error).
// Off by default, so CPU and GPU runs agree to float32 rounding; `train.allow_tf32`.
void set_allow_tf32(bool allow);
bool allow_tf32();
// "cuBLAS 13.0.0" in a CUDA build (kernels/cuda/), "built without CUDA support" otherwise.
std::string cuda_library_info();

}  // namespace relpos::k
