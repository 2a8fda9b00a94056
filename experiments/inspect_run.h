// experiments/inspect_run.h — what `relpos inspect RUN` shows of a trained model (the teaching
// views of how gradients reach position encodings):
//   learned_bias        the additive bias each layer's encoding adds vs distance kj - qi <= 0,
//                       per head, times alpha (Toeplitz biases: T5 buckets, ALiBi, KERPLE,
//                       Sandwich, dynamic MLP; FIRE through its score term at query n-1)
//   position_grad_rows  one training batch forward + backward; for every position
//                       parameter, the L2 norm of its gradient per row (T5: per bucket, Shaw:
//                       per clipped offset, learned: per position) — which rows learn, which starve
//   attention_maps      attention probabilities [H, L, L] of every layer for one input
//   attention_graph_dot the autograd graph of one attention layer as Graphviz DOT, every node
//                       labelled with its op, output shape and the norm of the gradient
//                       reaching it (micrograd's draw_dot, with shapes)
//   entry_gradcheck     analytic vs central-difference gradient of one parameter entry of a
//                       float64 attention layer (`relpos gradcheck --entry`)
#pragma once
#include <map>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "nn/models.h"
#include "trainers/config.h"
#include "trainers/data/data.h"

namespace relpos::train {

struct BiasCurve {
  int64_t layer = 0, head = 0;    // layer -1: the same curve in every layer (listed once)
  std::vector<int64_t> distance;  // kj - qi: 0, -1, ..., -(n-1)
  std::vector<double> bias;       // the logit added at that distance
};
// Empty for encodings without a distance-only bias (rotations, content terms): the note says why.
// Where every layer's curves are equal (a table shared by the stack and no per-layer alpha, or a
// fixed bias such as ALiBi's), they are listed once, with layer -1.
std::vector<BiasCurve> learned_bias(const nn::Model& model, int64_t n, std::string* note = nullptr);

struct RowGrad {
  std::string param;
  std::vector<int64_t> shape;
  std::vector<double> row_norm;  // [shape[0]]: ||grad[r, ...]||_2
  // Tables indexed by distance (T5 and DeBERTa buckets, Shaw offsets, Transformer-XL
  // distances: PositionEncoding::bias_index): the distances kj - qi each row serves, probed over
  // |kj - qi| <= probe_distance (causal: kj <= qi). Empty for other tables (absolute positions,
  // patch-grid or graph indices).
  std::vector<std::optional<std::pair<int64_t, int64_t>>> row_distances;  // [min, max]; nullopt: none in the probe
  int64_t train_distance = 0;  // the longest |kj - qi| of the training batch (its length - 1)
  int64_t probe_distance = 0;  // a row whose range reaches +-probe_distance also serves every longer distance
};
std::vector<RowGrad> position_grad_rows(nn::Model& model, const Dataset& data, uint64_t seed);

// tokens [1, L] -> per layer [H, L, L]
// positions: the input's position channels [1, L, P] (model.position_channels), or undefined.
std::vector<Tensor> attention_maps(const nn::Model& model, const Tensor& tokens, const Tensor& positions = Tensor());

// The first self-attention layer of the model on x [1, L, D] (seeded), backward of sum(out * u).
// position_index: the [L, L] (or [1, L, L]) index of encodings that look their bias up by one
// (graph_spd, relative_2d with an explicit index), e.g. the first example of a data batch; then L
// is its size. Undefined for every other encoding.
// positions: the [1, L, P] position channels of encodings that read them (ast), likewise.
std::string attention_graph_dot(const nn::Model& model, int64_t L, uint64_t seed = 0,
                                const Tensor& position_index = Tensor(), const Tensor& positions = Tensor());

// The bias an index encoding draws over two relation coordinates (PositionEncoding::bias_grid:
// ast over (up, down)), times layer 0's alpha; nullopt for the others.
struct BiasGridView {
  std::string row_axis, col_axis, note;
  std::vector<std::vector<std::vector<double>>> heads;  // [H][R][C]
};
std::optional<BiasGridView> learned_bias_grid(const nn::Model& model);

struct EntryCheck {
  std::string param;
  std::vector<int64_t> index;
  double analytic = 0, numeric = 0;
  std::vector<std::string> params;  // every parameter name of the layer (for messages)
};
// A float64 attention layer (d_model 8, 2 heads, causal, L = 6, bias scale alpha on) with
// encoding `type`; param "" picks the first position parameter, index {} its first entry.
EntryCheck entry_gradcheck(const nn::PositionType& type, const std::map<std::string, std::string>& params,
                           const std::string& param, const std::vector<int64_t>& index, double eps = 1e-6);

}  // namespace relpos::train
