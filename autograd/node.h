// autograd/node.h — the backward graph: a Node turns the gradient of its output into
// gradients of its inputs and passes them along its Edges. Leaves end in AccumulateGrad.
// Vocabulary follows PyTorch (Node, Edge, AccumulateGrad, saved tensors, version counter).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace relpos {

struct VariableImpl;
class Node;

// Where one input's gradient goes: the node that produced that input (or its leaf's
// AccumulateGrad). A null fn means the input does not need a gradient.
struct Edge {
  std::shared_ptr<Node> fn;
};

using GradHook = std::function<Tensor(const Tensor&)>;  // return undefined to keep the grad

class Node {
 public:
  explicit Node(std::string name);
  virtual ~Node() = default;

  // Gradients w.r.t. each input (aligned with next_edges; undefined = none), given the
  // gradient of this node's output.
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  // Free saved tensors after a backward without retain_graph.
  virtual void release() {}

  const std::string& name() const { return name_; }
  uint64_t sequence_nr() const { return seq_; }
  std::vector<Edge>& next_edges() { return next_; }
  std::vector<GradHook>& pre_hooks() { return pre_hooks_; }

 private:
  std::string name_;
  uint64_t seq_;
  std::vector<Edge> next_;
  std::vector<GradHook> pre_hooks_;  // run on the incoming gradient before apply()
};

// A tensor kept for backward, with the version it had when saved. get() throws if the
// tensor was modified in place since (naming the op that saved it).
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, const char* op);
  const Tensor& get() const;

 private:
  Tensor t_;
  uint64_t version_ = 0;
  const char* op_ = "";
};

using BackwardFn = std::function<std::vector<Tensor>(const Tensor&)>;

// The node of every differentiable op: a backward closure that captures SavedTensors.
class FunctionNode : public Node {
 public:
  FunctionNode(std::string name, BackwardFn fn) : Node(std::move(name)), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  void release() override { fn_ = nullptr; }

 private:
  BackwardFn fn_;
};

// Accumulates the incoming gradient into a leaf Variable's .grad (after the leaf's hooks).
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::weak_ptr<VariableImpl> var);
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  // Whether g (grad_output after the leaf's hooks) can become .grad itself (node.cpp).
  static bool owned_by_leaf(const Tensor& g, const Tensor& grad_output);

 private:
  std::weak_ptr<VariableImpl> var_;
};

}  // namespace relpos
