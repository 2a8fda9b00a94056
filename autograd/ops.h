// autograd/ops.h — every differentiable op on Variables. Each is implemented in
// autograd/ops/*.cpp with its forward and backward side by side.
#pragma once
#include <vector>

#include "autograd/variable.h"
#include "core/rng.h"
#include "kernels/ops.h"

namespace relpos {

// ---- elementwise (broadcasting) ----
Variable add(const Variable& a, const Variable& b);
Variable sub(const Variable& a, const Variable& b);
Variable mul(const Variable& a, const Variable& b);
Variable div(const Variable& a, const Variable& b);
Variable pow(const Variable& a, const Variable& b);  // a > 0 where b is differentiated
Variable add(const Variable& a, double s);
Variable mul(const Variable& a, double s);
Variable pow(const Variable& a, double p);
Variable neg(const Variable& x);
Variable exp(const Variable& x);
Variable log(const Variable& x);
Variable sqrt(const Variable& x);
Variable rsqrt(const Variable& x);
Variable abs(const Variable& x);
Variable tanh(const Variable& x);
Variable sigmoid(const Variable& x);
Variable relu(const Variable& x);
enum class GeluApprox { Erf, Tanh };
Variable gelu(const Variable& x, GeluApprox approx = GeluApprox::Erf);
Variable silu(const Variable& x);
Variable clamp(const Variable& x, double lo, double hi);
// out = cond != 0 ? a : b (cond is not differentiated)
Variable where(const Tensor& cond, const Variable& a, const Variable& b);
Variable masked_fill(const Variable& x, const Tensor& mask, double value);
// x: [..., Lq, Lk]; cells whose key position k_offset + j lies after query position
// q_offset + i become value (gradient 0 there). The causal mask without a mask tensor.
Variable causal_fill(const Variable& x, int64_t q_offset, int64_t k_offset, double value);
// comparisons: 1/0 in x's dtype, never differentiable
Tensor eq(const Variable& a, const Variable& b);
Tensor ne(const Variable& a, const Variable& b);
Tensor lt(const Variable& a, const Variable& b);
Tensor le(const Variable& a, const Variable& b);
Tensor gt(const Variable& a, const Variable& b);
Tensor ge(const Variable& a, const Variable& b);

Variable operator+(const Variable& a, const Variable& b);
Variable operator-(const Variable& a, const Variable& b);
Variable operator*(const Variable& a, const Variable& b);
Variable operator/(const Variable& a, const Variable& b);
Variable operator-(const Variable& x);
Variable operator+(const Variable& a, double s);
Variable operator-(const Variable& a, double s);
Variable operator*(const Variable& a, double s);
Variable operator/(const Variable& a, double s);
Variable operator*(double s, const Variable& a);

// ---- reductions (dims empty = all) ----
Variable sum(const Variable& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Variable mean(const Variable& x, std::vector<int64_t> dims = {}, bool keepdim = false);
// max over dims; the gradient is split evenly between tied maxima
Variable max(const Variable& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Variable logsumexp(const Variable& x, std::vector<int64_t> dims, bool keepdim = false);
Variable var(const Variable& x, std::vector<int64_t> dims = {}, bool keepdim = false,
             int64_t correction = 1);

// ---- linear algebra ----
Variable matmul(const Variable& a, const Variable& b);  // [..., M, K] @ [..., K, N]
// A linear layer as one node: x [..., K], weight [N, K], bias [N] or undefined -> x W^T + b
// [..., N] (PyTorch's F.linear). The bias is the GEMM's epilogue (k::matmul's bias): no add pass
// and no transpose node; the values of matmul(x, transpose(w, 0, 1)) + b.
Variable linear(const Variable& x, const Variable& weight, const Variable& bias);
// act(linear(x, weight, bias)) as one node, act one of k::is_activation (relu, gelu (erf),
// gelu_tanh, silu): the activation is applied in the GEMM's epilogue, which also saves act'
// for the backward (k::matmul_act) — the same values as the two nodes, without their passes.
Variable linear(const Variable& x, const Variable& weight, const Variable& bias, k::Unary act);
// residual + linear(x, weight, bias) as one node (a residual connection around a linear layer):
// residual (the output's shape) is added in the GEMM's epilogue (k::matmul_add) — the values of
// the two nodes, without the add's pass; its gradient is the output's.
Variable linear(const Variable& x, const Variable& weight, const Variable& bias, const Variable& residual);
// A two-layer MLP as one node: linear(linear(x, w1, b1, act), w2, b2) with x [..., D], w1 [F, D],
// w2 [D', F], biases [F] / [D'] or undefined. The same values forward and backward as the two
// nodes; the backward multiplies g W2 by act' in that GEMM's epilogue (k::matmul_mul) instead of
// in a pass of its own. With a residual (the output's shape; undefined: none) it is added in the
// second GEMM's epilogue: residual + mlp(...), as linear's residual above.
Variable mlp(const Variable& x, const Variable& w1, const Variable& b1, const Variable& w2, const Variable& b2,
             k::Unary act, const Variable& residual = Variable());

// ---- softmax family / normalisation / loss ----
Variable softmax(const Variable& x, int64_t dim);
Variable log_softmax(const Variable& x, int64_t dim);
Variable layer_norm(const Variable& x, const Variable& weight, const Variable& bias, double eps = 1e-5);
Variable rms_norm(const Variable& x, const Variable& weight, double eps = 1e-6);
// logits: [N, C], target: int64 [N]
Variable cross_entropy(const Variable& logits, const Tensor& target, int64_t ignore_index = -100,
                       k::Reduction reduction = k::Reduction::Mean);

// ---- indexing ----
Variable embedding(const Variable& weight, const Tensor& idx);  // [V, D], [...] -> [..., D]
Variable index_select(const Variable& x, int64_t dim, const Tensor& idx);
Variable gather(const Variable& x, int64_t dim, const Tensor& idx);
// zeros(shape) with out[..idx[i][j]..] += src[i][j] along dim (backward: gather)
Variable scatter_add(const Shape& shape, int64_t dim, const Tensor& idx, const Variable& src);

// ---- distance-only biases ----
// scores: [B, H, Lq, Lk], bias: [H, Lq + Lk - 1] -> scores + bias[h, j - i + Lq - 1]
// Backward to the bias sums dS along diagonals (no [H, Lq, Lk] tensor, no atomics).
Variable add_toeplitz_bias(const Variable& scores, const Variable& bias);
// ---- depthwise 2D convolution (PEG, the cpe encoding) ----
// x [B, H, W, C] (channels last), w [C, k, k] (k odd), bias [C] or undefined -> [B, H, W, C]:
// PyTorch's Conv2d(C, C, k, padding=(k-1)/2, groups=C) on x.permute(0, 3, 1, 2), permuted back.
// Gradients for x, w and bias (k::depthwise_conv2d_backward).
Variable depthwise_conv2d(const Variable& x, const Variable& w, const Variable& bias);
// x [..., L, dh] rotated pairwise by the cos/sin table cs [2, L, r/2] (k::rotary); no gradient to cs.
Variable rotary(const Variable& x, const Tensor& cs, bool interleaved);
// softmax(scale q k^T + bias (Toeplitz [H, Lq + Lk - 1], may be undefined) + masks) v in one
// fused op (k::attention): q [B, H, Lq, dh], k, v [B, H, Lk, dh] -> [B, H, Lq, dh]; O(L)
// memory; gradients for q, k, v and the bias table. `forward` (optional) receives the
// kernel's outputs: the row logsumexp and, with args.row_stats, the monitor statistics.
Variable fused_attention(const Variable& q, const Variable& k, const Variable& v, const Variable& bias,
                         const Tensor& key_padding, const k::AttentionArgs& args, k::AttentionOut* forward = nullptr);
// The same with bucketed content terms (Shaw; k::AttentionBuckets): qr = q R_k^T
// [B, H, Lq, NB] (differentiable), bucket int64 [Lq + Lk - 1] -> [B, H, Lq, dh + NB]: the
// attention output O (first dh), then w = P summed per bucket (last NB; the caller adds w R_v).
Variable fused_attention_buckets(const Variable& q, const Variable& k, const Variable& v, const Variable& bias,
                                 const Variable& qr, const Tensor& bucket, const Tensor& key_padding,
                                 const k::AttentionArgs& args, k::AttentionOut* forward = nullptr);
// The same with an index-driven bias (k::AttentionIndexBias; Swin 2D, Graphormer):
// S_ij += table[index[(b,) i, j], h], table [NT, H] (differentiable), index int64 [Lq, Lk] or
// [B, Lq, Lk] (values in [0, NT)) -> [B, H, Lq, dh]; gradients for q, k, v, bias and table.
Variable fused_attention_indexed(const Variable& q, const Variable& k, const Variable& v, const Variable& bias,
                                 const Variable& table, const Tensor& index, const Tensor& key_padding,
                                 const k::AttentionArgs& args, k::AttentionOut* forward = nullptr);

// ---- shape (views share storage; their backward maps the gradient back) ----
Variable reshape(const Variable& x, const Shape& shape);
Variable transpose(const Variable& x, int64_t a, int64_t b);
Variable permute(const Variable& x, const std::vector<int64_t>& order);
Variable narrow(const Variable& x, int64_t dim, int64_t start, int64_t length);
Variable select(const Variable& x, int64_t dim, int64_t index);
Variable expand(const Variable& x, const Shape& shape);
Variable unsqueeze(const Variable& x, int64_t dim);
Variable squeeze(const Variable& x, int64_t dim);
Variable contiguous(const Variable& x);
Variable cat(const std::vector<Variable>& xs, int64_t dim);
std::vector<Variable> split(const Variable& x, const std::vector<int64_t>& sizes, int64_t dim);

// ---- random ----
// Inverted dropout; identity when !training or p == 0.
Variable dropout(const Variable& x, double p, bool training, Generator& gen);

}  // namespace relpos
