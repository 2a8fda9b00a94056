// nn/positional/ast_tree.cpp — token trees of the `ast` encoding (see ast_tree.h).
#include "nn/positional/ast_tree.h"

#include <algorithm>

#include "core/error.h"

namespace relpos::nn {

namespace {
// Window parents (-1: the virtual root) and window depths from the parent channel.
void window_tree(const int64_t* parent, int64_t L, const std::string& what, std::vector<int64_t>& par,
                 std::vector<int64_t>& wd) {
  par.assign(size_t(L), -1);
  wd.assign(size_t(L), 1);
  for (int64_t t = 0; t < L; ++t) {
    const int64_t off = parent[t];
    RELPOS_CHECK(off >= 0,
                 "position encoding 'ast': {}, token {}: parent channel value {} is negative (it counts the tokens "
                 "back to the parent, 0 = a root; a parent after its child could close a cycle)",
                 what, t, off);
    if (off > 0 && t - off >= 0) {
      par[size_t(t)] = t - off;
      wd[size_t(t)] = wd[size_t(t - off)] + 1;
    }
  }
}
}  // namespace

void ast_tree_steps(const int64_t* parent, int64_t L, bool causal, int64_t* up, int64_t* down,
                    const std::string& what) {
  std::vector<int64_t> par, wd;
  window_tree(parent, L, what, par, wd);
  std::vector<int64_t> stamp(size_t(L), -1);  // stamp[x] == i: x is i or an ancestor of i
  for (int64_t i = 0; i < L; ++i) {
    for (int64_t x = i; x >= 0; x = par[size_t(x)]) stamp[size_t(x)] = i;
    const int64_t jend = causal ? i + 1 : L;
    for (int64_t j = 0; j < L; ++j) {
      if (j >= jend) {
        up[i * L + j] = down[i * L + j] = 0;
        continue;
      }
      int64_t a = j;
      while (a >= 0 && stamp[size_t(a)] != i) a = par[size_t(a)];
      const int64_t da = a < 0 ? 0 : wd[size_t(a)];
      up[i * L + j] = wd[size_t(i)] - da;
      down[i * L + j] = wd[size_t(j)] - da;
    }
  }
}

void ast_tree_steps_bruteforce(const int64_t* parent, int64_t L, int64_t* up, int64_t* down) {
  // path[t]: t's ancestors from the virtual root (-1) down to t itself.
  std::vector<std::vector<int64_t>> path(static_cast<size_t>(L));
  for (int64_t t = 0; t < L; ++t) {
    std::vector<int64_t> p{t};
    int64_t x = t;
    while (true) {
      const int64_t off = parent[x];
      RELPOS_CHECK(off >= 0, "ast_tree_steps_bruteforce: token {} has a negative parent {}", x, off);
      if (off == 0 || x - off < 0) break;
      x -= off;
      p.push_back(x);
    }
    p.push_back(-1);
    std::reverse(p.begin(), p.end());
    path[size_t(t)] = p;
  }
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < L; ++j) {
      const auto &a = path[size_t(i)], &b = path[size_t(j)];
      size_t common = 0;
      while (common < a.size() && common < b.size() && a[common] == b[common]) ++common;
      up[i * L + j] = int64_t(a.size() - common);
      down[i * L + j] = int64_t(b.size() - common);
    }
}

void check_ast_channels(const std::string& file, const std::vector<uint64_t>& example_starts,
                        const std::string& parent_name, const int32_t* parent, const std::string& depth_name,
                        const int32_t* depth) {
  for (size_t e = 0; e + 1 < example_starts.size(); ++e) {
    const uint64_t s = example_starts[e], end = example_starts[e + 1];
    for (uint64_t t = s; t < end; ++t) {
      const int64_t k = int64_t(t - s), off = parent[t];
      RELPOS_CHECK(off >= 0,
                   "{}: example {}, token {} (token {} of the file): channel '{}' is {}, which points forward "
                   "(it counts the tokens back to the parent node's token, 0 = a root); a parent must come before "
                   "its child, so the parents form a tree and never a cycle",
                   file, e, k, t, parent_name, off);
      RELPOS_CHECK(off <= k,
                   "{}: example {}, token {} (token {} of the file): channel '{}' is {}, which points {} tokens "
                   "before the example's first token; a parent lies inside the token's example (0 = a root)",
                   file, e, k, t, parent_name, off, off - k);
      if (depth == nullptr) continue;
      const int64_t want = off == 0 ? 0 : int64_t(depth[t - uint64_t(off)]) + 1;
      RELPOS_CHECK(depth[t] == want,
                   "{}: example {}, token {} (token {} of the file): channel '{}' is {}, but channel '{}' ({}) makes "
                   "it {} ({})",
                   file, e, k, t, depth_name, depth[t], parent_name, off, want,
                   off == 0 ? "a root has depth 0" : "the parent's depth + 1");
    }
  }
}

}  // namespace relpos::nn
