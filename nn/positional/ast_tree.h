// nn/positional/ast_tree.h — the token trees the `ast` encoding (ast.cpp) reads, exposed for
// the data checks, tests, inspect and gradcheck.
//
// A token's place in its syntax tree arrives as the token channel `parent` (docs/data.md,
// "Python syntax trees"; scripts/prepare_python_ast.py): the number of tokens back from the
// token to the token that stands for its parent node, 0 for a root. Parents always precede
// their children, so a token's ancestors are all earlier tokens and a decoder query needs no
// later token to relate itself to an earlier key.
//
// Within one window of L tokens (a training window may start inside an example and span
// several), every root and every token whose parent lies before the window's first token hangs
// from one virtual root above the window: window depth wd(root child) = 1, wd(t) = wd(parent) + 1.
// For a query token i and a key token j with lowest common ancestor a (the virtual root when
// they share no ancestor in the window):
//   up(i, j)   = wd(i) - wd(a)     steps from i's node up to a
//   down(i, j) = wd(j) - wd(a)     steps from a down to j's node
//   path(i, j) = up + down         the length of the tree path between them
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace relpos::nn {

// The token channel the `ast` encoding reads (data.position_channels must list it) and the
// one the data checks compare with it (written by scripts/prepare_python_ast.py).
inline constexpr const char* kAstParentChannel = "parent";
inline constexpr const char* kAstDepthChannel = "depth";

// up and down ([L * L] each, row-major: query i, key j) of one window. parent holds the window's
// L parent-channel values; a negative one is an error naming the token (`what` names the window,
// e.g. "batch row 3"). When causal, only keys j <= i are computed (the others are 0).
void ast_tree_steps(const int64_t* parent, int64_t L, bool causal, int64_t* up, int64_t* down,
                    const std::string& what = "window");

// The same by an independent brute-force walk: the ancestor lists of both tokens, compared
// from the root (for tests).
void ast_tree_steps_bruteforce(const int64_t* parent, int64_t L, int64_t* up, int64_t* down);

// Checks the tree channels of a token file: for every example e and token t (index k within
// e), 0 <= parent[t] <= k (a parent inside the example and before the token: a later parent
// could close a cycle), and, when depth is given, depth[t] = 0 for a root and depth of the
// parent + 1 otherwise. Errors name the file, the example, the token and the channel.
// example_starts: n_examples + 1 offsets (the last is the token count).
void check_ast_channels(const std::string& file, const std::vector<uint64_t>& example_starts,
                        const std::string& parent_name, const int32_t* parent, const std::string& depth_name,
                        const int32_t* depth);

}  // namespace relpos::nn
