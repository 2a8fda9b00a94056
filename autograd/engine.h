// autograd/engine.h — runs backward: topological order over the graph reachable from the
// root, each node run once after every consumer of its output has contributed.
#pragma once
#include "autograd/variable.h"

namespace relpos {

struct Engine {
  static void backward(const Variable& root, const Tensor& grad_output, bool retain_graph);
};

}  // namespace relpos
