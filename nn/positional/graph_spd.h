// nn/positional/graph_spd.h — shortest-path distances for the Graphormer spatial encoding
// (graph_spd.cpp), exposed for data pipelines, tests and `relpos gradcheck`.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace relpos::nn {

// The index value graph_spd reads as "no path between i and j".
inline constexpr int64_t kUnreachable = -1;

// adjacency[b][u] lists the neighbours of node u in example b (directed edges as given: list
// both directions for an undirected graph). Example b has adjacency[b].size() <= L nodes;
// nodes beyond it are padding. Returns int64 [B, L, L]: BFS hop counts, spd[b, i, i] = 0,
// kUnreachable (-1) where there is no path and for every pair that involves a padding node.
// Errors name the example, the node and the bad neighbour.
Tensor shortest_path_distances(const std::vector<std::vector<std::vector<int64_t>>>& adjacency, int64_t L);

}  // namespace relpos::nn
