// The token trees of the `ast` encoding (nn/positional/ast_tree.h): the per-window (up, down)
// steps against a hand-worked tree and against a brute-force walk over random windows (windows
// that start inside an example and span several), the causal property (a query's relations to
// earlier keys never read a later token), and the token-file channel checks on hostile input.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/positional/ast_tree.h"

using namespace relpos;
using Catch::Matchers::Contains;

TEST_CASE("ast tree: (up, down) of a hand-worked window", "[positional][ast]") {
  // `x = f(a)` then `y`: tokens x = f ( a ) y
  //   x (root), '=' -> x, f -> x, '(' -> f, a -> '(', ')' -> '(', y (root)
  const std::vector<int64_t> parent = {0, 1, 2, 1, 1, 2, 0};
  const int64_t L = 7;
  std::vector<int64_t> up(L * L), down(L * L);
  nn::ast_tree_steps(parent.data(), L, false, up.data(), down.data());
  // window depths: x 1, = 2, f 2, ( 3, a 4, ) 4, y 1
  // a -> '=': a up to x (3 steps), down to '=' (1)
  CHECK(up[4 * L + 1] == 3);
  CHECK(down[4 * L + 1] == 1);
  // a -> ')': siblings under '(': 1 up, 1 down
  CHECK(up[4 * L + 5] == 1);
  CHECK(down[4 * L + 5] == 1);
  // y -> a: different statements, through the virtual root: 1 up, 4 down
  CHECK(up[6 * L + 4] == 1);
  CHECK(down[6 * L + 4] == 4);
  // f -> a: a descends from f: 0 up, 2 down; a -> f: 2 up, 0 down
  CHECK(up[2 * L + 4] == 0);
  CHECK(down[2 * L + 4] == 2);
  CHECK(up[4 * L + 2] == 2);
  CHECK(down[4 * L + 2] == 0);
  for (int64_t i = 0; i < L; ++i) CHECK((up[i * L + i] == 0 && down[i * L + i] == 0));

  // The same window cut after '(' : a, ')' and y keep their parents relative to themselves, a
  // window starting at '(' sees '(' hang from the virtual root.
  const std::vector<int64_t> cut = {1, 1, 2, 0};  // ( a ) y  ('(' points 1 back, before the window)
  std::vector<int64_t> u2(16), d2(16);
  nn::ast_tree_steps(cut.data(), 4, false, u2.data(), d2.data());
  CHECK(u2[1 * 4 + 2] == 1);  // a -> ')'
  CHECK(d2[1 * 4 + 2] == 1);
  CHECK(u2[3 * 4 + 1] == 1);  // y -> a: y's root, then '(' (depth 1) and a (depth 2)
  CHECK(d2[3 * 4 + 1] == 2);
}

TEST_CASE("ast tree: the (up, down) steps equal a brute-force walk on random windows", "[positional][ast]") {
  std::mt19937_64 rng(7);
  for (int rep = 0; rep < 200; ++rep) {
    const int64_t L = 1 + int64_t(rng() % 40);
    // A stream of examples (a new one starts with probability 1/12), the window starts inside it.
    std::vector<int64_t> parent(static_cast<size_t>(L));
    int64_t k = int64_t(rng() % 5);  // the window's first token is token k of its example
    for (int64_t t = 0; t < L; ++t) {
      if (t > 0 && rng() % 12 == 0) k = 0;
      parent[size_t(t)] = (k == 0 || rng() % 6 == 0) ? 0 : 1 + int64_t(rng() % uint64_t(k));
      ++k;
    }
    std::vector<int64_t> up(L * L), down(L * L), bu(L * L), bd(L * L), cu(L * L), cd(L * L);
    nn::ast_tree_steps(parent.data(), L, false, up.data(), down.data());
    nn::ast_tree_steps_bruteforce(parent.data(), L, bu.data(), bd.data());
    REQUIRE(up == bu);
    REQUIRE(down == bd);
    nn::ast_tree_steps(parent.data(), L, true, cu.data(), cd.data());
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < L; ++j) {
        CHECK(cu[i * L + j] == (j <= i ? bu[i * L + j] : 0));
        CHECK(cd[i * L + j] == (j <= i ? bd[i * L + j] : 0));
      }
    // Symmetry of the tree path: up(i, j) = down(j, i).
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < L; ++j) REQUIRE(up[i * L + j] == down[j * L + i]);
  }
}

TEST_CASE("ast tree: a query's relations to earlier keys never read a later token", "[positional][ast]") {
  std::mt19937_64 rng(11);
  const int64_t L = 24;
  std::vector<int64_t> parent(L);
  for (int64_t t = 0; t < L; ++t) parent[size_t(t)] = t == 0 ? 0 : int64_t(rng() % uint64_t(t + 1));
  std::vector<int64_t> up(L * L), down(L * L);
  nn::ast_tree_steps(parent.data(), L, true, up.data(), down.data());
  for (int64_t cut = 1; cut < L; ++cut) {
    std::vector<int64_t> other = parent;  // every token from `cut` on re-drawn
    for (int64_t t = cut; t < L; ++t) other[size_t(t)] = int64_t(rng() % uint64_t(t + 1));
    std::vector<int64_t> u2(L * L), d2(L * L);
    nn::ast_tree_steps(other.data(), L, true, u2.data(), d2.data());
    for (int64_t i = 0; i < cut; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        REQUIRE(u2[i * L + j] == up[i * L + j]);
        REQUIRE(d2[i * L + j] == down[i * L + j]);
      }
  }
}

TEST_CASE("ast tree: a negative parent in a window is an error naming the token", "[positional][ast][hostile]") {
  const std::vector<int64_t> parent = {0, 1, -1};
  std::vector<int64_t> up(9), down(9);
  CHECK_THROWS_WITH(nn::ast_tree_steps(parent.data(), 3, false, up.data(), down.data(), "batch row 1"),
                    Contains("batch row 1, token 2: parent channel value -1 is negative"));
}

TEST_CASE("ast tree: the token-file channel checks name the file, example, token and channel",
          "[positional][ast][hostile]") {
  // Two examples: tokens 0..3 and 4..6.
  const std::vector<uint64_t> starts = {0, 4, 7};
  const std::vector<int32_t> parent = {0, 1, 2, 1, 0, 1, 1};
  const std::vector<int32_t> depth = {0, 1, 1, 2, 0, 1, 2};
  CHECK_NOTHROW(nn::check_ast_channels("f.rptok", starts, "parent", parent.data(), "depth", depth.data()));
  CHECK_NOTHROW(nn::check_ast_channels("f.rptok", starts, "parent", parent.data(), "depth", nullptr));

  auto bad = parent;
  bad[5] = 2;  // example 1, token 1 points 2 back: into example 0
  CHECK_THROWS_WITH(nn::check_ast_channels("f.rptok", starts, "parent", bad.data(), "depth", depth.data()),
                    Contains("f.rptok: example 1, token 1 (token 5 of the file): channel 'parent' is 2, which points "
                             "1 tokens before the example's first token"));
  bad = parent;
  bad[1] = -1;  // token 1 -> token 2 and token 2 -> 2 back = token 0... a forward pointer: 1 <-> 2 would cycle
  bad[2] = 1;
  CHECK_THROWS_WITH(nn::check_ast_channels("f.rptok", starts, "parent", bad.data(), "depth", nullptr),
                    Contains("f.rptok: example 0, token 1 (token 1 of the file): channel 'parent' is -1, which points "
                             "forward"));
  CHECK_THROWS_WITH(nn::check_ast_channels("f.rptok", starts, "parent", bad.data(), "depth", nullptr),
                    Contains("never a cycle"));
  bad = parent;
  bad[0] = 1;  // the first token of the file points before it
  CHECK_THROWS_WITH(nn::check_ast_channels("f.rptok", starts, "parent", bad.data(), "depth", nullptr),
                    Contains("example 0, token 0 (token 0 of the file): channel 'parent' is 1"));
  auto bd = depth;
  bd[2] = 5;
  CHECK_THROWS_WITH(nn::check_ast_channels("f.rptok", starts, "parent", parent.data(), "depth", bd.data()),
                    Contains("f.rptok: example 0, token 2 (token 2 of the file): channel 'depth' is 5, but channel "
                             "'parent' (2) makes it 1 (the parent's depth + 1)"));
  bd = depth;
  bd[4] = 1;
  CHECK_THROWS_WITH(nn::check_ast_channels("f.rptok", starts, "parent", parent.data(), "depth", bd.data()),
                    Contains("example 1, token 0 (token 4 of the file): channel 'depth' is 1, but channel 'parent' "
                             "(0) makes it 0 (a root has depth 0)"));
}
