// trainers/data/structured_tasks.cpp — toy encoder tasks for the index-based encodings.
// Tokens: 0 PAD, 1..3 reserved, then symbols 4 .. 4+V-1 (as in tasks.cpp).
//   patch_grid  a grid_h x grid_w grid of random symbols, flattened row-major (the patch
//               order relative_2d assumes); the label of patch (r, c) is the symbol of the
//               patch below it, (r + 1 mod grid_h, c): solving it needs 2D relative position.
//   graph       seq_len nodes of a random undirected graph (each edge with edge_prob); node 0
//               carries symbol 0 and the others symbol 1; the label of node i is its
//               shortest-path distance to node 0, as symbol min(d, V - 2), or symbol V - 1 when
//               unreachable. The batch carries the [B, L, L] shortest-path distances
//               (position_index) that graph_spd reads.
#include "nn/positional/graph_spd.h"
#include "trainers/data/data_tasks.h"

namespace relpos::train {

namespace {

constexpr int64_t FIRST = 4;

class StructuredDataset : public Dataset {
 public:
  explicit StructuredDataset(const Config& cfg) : d_(cfg.data) {
    const DataTask& task = find_data_task(d_.task);
    RELPOS_CHECK_CONFIG(d_.vocab_size >= task.min_vocab, "data.task '{}' needs data.vocab_size >= {} ({}), got {}",
                        d_.task, task.min_vocab, task.min_vocab_reason, d_.vocab_size);
  }
  int64_t vocab_size() const override { return d_.vocab_size + FIRST; }

  Batch train_batch(Generator& g) const override { return make(d_.seq_len, g); }
  Batch val_batch(int64_t i, int64_t seq_len) const override {
    Generator g(0x57A7000ULL + uint64_t(i));
    RELPOS_CHECK_CONFIG(!find_data_task(d_.task).grid || seq_len == d_.grid_h * d_.grid_w,
                        "patch_grid evaluates only on its {} x {} grid (seq_len {}), not seq_len {}", d_.grid_h,
                        d_.grid_w, d_.grid_h * d_.grid_w, seq_len);
    return make(seq_len, g);
  }
  std::vector<int64_t> encode(const std::string&) const override {
    fail("the {} task has no text prompts", d_.task);
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string s;
    for (int64_t i : ids) {
      if (!s.empty()) s += ' ';
      s += std::to_string(i - FIRST);
    }
    return s;
  }

 private:
  Batch make(int64_t L, Generator& g) const {
    const int64_t B = d_.batch_size;
    std::vector<int64_t> x(size_t(B * L)), y(size_t(B * L));
    Batch out;
    if (find_data_task(d_.task).grid) {  // patch_grid
      const int64_t H = d_.grid_h, W = d_.grid_w;
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t p = 0; p < L; ++p) x[size_t(b * L + p)] = FIRST + int64_t(g.next_u64() % uint64_t(d_.vocab_size));
        for (int64_t r = 0; r < H; ++r)
          for (int64_t c = 0; c < W; ++c) y[size_t(b * L + r * W + c)] = x[size_t(b * L + ((r + 1) % H) * W + c)];
      }
    } else {  // graph
      std::vector<std::vector<std::vector<int64_t>>> adj(static_cast<size_t>(B),
                                                         std::vector<std::vector<int64_t>>(static_cast<size_t>(L)));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t u = 0; u < L; ++u)
          for (int64_t v = u + 1; v < L; ++v)
            if (g.uniform() < d_.edge_prob) {
              adj[size_t(b)][size_t(u)].push_back(v);
              adj[size_t(b)][size_t(v)].push_back(u);
            }
      out.position_index = nn::shortest_path_distances(adj, L);
      std::vector<int64_t> spd = out.position_index.to_vector<int64_t>();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < L; ++i) {
          x[size_t(b * L + i)] = FIRST + (i == 0 ? 0 : 1);
          int64_t dist = spd[size_t((b * L + i) * L)];  // spd[b, i, 0]
          y[size_t(b * L + i)] = FIRST + (dist < 0 ? d_.vocab_size - 1 : std::min(dist, d_.vocab_size - 2));
        }
    }
    out.input = Tensor::from_vector(x, {B, L});
    out.target = Tensor::from_vector(y, {B, L});
    return out;
  }

  DataConfig d_;
};

}  // namespace

std::unique_ptr<Dataset> make_structured_dataset(const Config& cfg) { return std::make_unique<StructuredDataset>(cfg); }

}  // namespace relpos::train
