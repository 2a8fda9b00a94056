// tests/core/test_tensor_str.cpp — Tensor::str, which error messages and test logs rely on.
#include <catch2/catch.hpp>

#include "core/tensor.h"

using namespace relpos;

TEST_CASE("tensor: str prints values, shape, dtype and device", "[core]") {
  Tensor t = Tensor::from_vector<double>({1.5, -2, 0.25, 4}, {2, 2});
  REQUIRE(t.str() == "tensor([[1.5, -2], [0.25, 4]], shape=[2, 2], dtype=float64, device=cpu)");
  REQUIRE(Tensor::scalar(3, DType::F32).str() == "tensor(3, shape=[], dtype=float32, device=cpu)");
  REQUIRE(Tensor::zeros({0, 3}).str() == "tensor([], shape=[0, 3], dtype=float32, device=cpu)");
  REQUIRE(Tensor().str() == "tensor(undefined)");
}

TEST_CASE("tensor: str elides the middle of long dims and never reads past the data", "[core]") {
  Tensor t = Tensor::arange(0, 20);
  REQUIRE(t.str(6) == "tensor([0, 1, 2, ..., 17, 18, 19], shape=[20], dtype=int64, device=cpu)");
  REQUIRE(t.str(5) == "tensor([0, 1, ..., 18, 19], shape=[20], dtype=int64, device=cpu)");
  REQUIRE(t.str(2) == "tensor([0, ..., 19], shape=[20], dtype=int64, device=cpu)");
  // Fewer than 2 per dim still shows one element from each end (it used to index past the end).
  REQUIRE(t.str(1) == "tensor([0, ..., 19], shape=[20], dtype=int64, device=cpu)");
  REQUIRE(t.str(0) == "tensor([0, ..., 19], shape=[20], dtype=int64, device=cpu)");
  Tensor m = Tensor::arange(0, 12).view({3, 4});
  REQUIRE(m.str(1) == "tensor([[0, ..., 3], ..., [8, ..., 11]], shape=[3, 4], dtype=int64, device=cpu)");
  REQUIRE(m.transpose(0, 1).str(2) == "tensor([[0, ..., 8], ..., [3, ..., 11]], shape=[4, 3], dtype=int64, device=cpu)");
}
