// autograd/function.h — how a differentiable op records itself: make_result() wraps the
// forward output in a Variable and, when grad mode is on and some input requires grad,
// attaches a FunctionNode whose closure computes the input gradients (one per input,
// undefined where an input needs none).
#pragma once
#include <initializer_list>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"

namespace relpos {

inline bool any_requires_grad(std::initializer_list<const Variable*> inputs) {
  for (const Variable* v : inputs)
    if (v->defined() && v->requires_grad()) return true;
  return false;
}

// Build the output Variable of op `name`. `backward` is only stored when a graph is needed.
inline Variable make_result(Tensor out, const char* name, std::vector<Variable> inputs,
                            BackwardFn backward) {
  Variable result(std::move(out));
  bool need = false;
  if (GradMode::is_enabled())
    for (const Variable& v : inputs) need = need || (v.defined() && v.requires_grad());
  if (!need) return result;
  auto node = std::make_shared<FunctionNode>(name, std::move(backward));
  for (const Variable& v : inputs) node->next_edges().push_back(v.defined() ? v.gradient_edge() : Edge{});
  result.set_grad_fn(std::move(node));
  return result;
}

// True when input i of the op needs a gradient (lets backward skip work).
inline bool wants_grad(const Variable& v) { return v.defined() && v.requires_grad(); }

}  // namespace relpos
