// Topological backward. 1) Walk the graph from the root once and count, for every node,
// how many edges point at it. 2) Run nodes from a ready queue ordered by creation
// sequence (latest first), summing the gradients that arrive for each node; a node becomes
// ready when its count drops to zero. The order is a pure function of the graph, so
// backward is deterministic.
#include "autograd/engine.h"

#include <queue>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "kernels/ops.h"

namespace relpos {

namespace {
// acc += g for a node that several edges reach (a tensor used by several ops: the residual
// stream, x feeding the q/k/v projections). In place when nothing else can see acc: its
// storage is held by acc alone (not by another edge's gradient — add's backward hands one
// tensor to both inputs —, a hook or a saved tensor) and it is dense, with g's shape; else a new
// tensor. The same values either way (acc + g, one rounding); in place saves a buffer and its
// page faults per accumulation.
void accumulate(Tensor& acc, const Tensor& g) {
  if (acc.storage() && acc.storage().use_count() == 1 && acc.is_contiguous() && acc.shape() == g.shape() &&
      acc.dtype() == g.dtype() && acc.device() == g.device())
    k::add_(acc, g);
  else
    acc = k::add(acc, g);
}
}  // namespace

void Engine::backward(const Variable& root, const Tensor& grad_output, bool retain_graph) {
  RELPOS_CHECK(root.defined(), "backward: undefined variable");
  RELPOS_CHECK(root.requires_grad(),
               "backward: the variable does not require grad and has no grad_fn (did every input "
               "have requires_grad=false, or was it computed under NoGradGuard?)");
  Tensor g0 = grad_output;
  if (!g0.defined()) {
    RELPOS_CHECK(root.numel() == 1,
                 "backward: grad_output can only be omitted for a one-element output, got shape {}",
                 shape_str(root.shape()));
    g0 = Tensor::ones(root.shape(), root.dtype(), root.device());
  }
  RELPOS_CHECK(g0.shape() == root.shape() && g0.dtype() == root.dtype(),
               "backward: grad_output {} does not match the output {}", describe(g0),
               describe(root.data()));
  NoGradGuard no_grad;  // backward formulas are not themselves recorded
  std::shared_ptr<Node> root_fn = root.gradient_edge().fn;

  // 1) dependency counts
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack{root_fn.get()};
  deps[root_fn.get()] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (Edge& e : n->next_edges()) {
      if (!e.fn) continue;
      auto [it, inserted] = deps.try_emplace(e.fn.get(), 0);
      ++it->second;
      if (inserted) stack.push_back(e.fn.get());
    }
  }

  // 2) run in dependency order
  auto later_first = [](Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  std::unordered_map<Node*, Tensor> grads;
  grads[root_fn.get()] = g0;
  ready.push(root_fn.get());
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    Tensor g = std::move(grads[n]);
    grads.erase(n);
    std::vector<Tensor> in_grads;
    if (g.defined()) {  // a node no gradient reached only passes the dependency count on
      for (GradHook& hook : n->pre_hooks()) {
        Tensor r = hook(g);
        if (r.defined()) g = r;
      }
      in_grads = n->apply(g);
    }
    if (!retain_graph) n->release();
    auto& edges = n->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      Node* next = edges[i].fn.get();
      if (!next) continue;
      if (i < in_grads.size() && in_grads[i].defined()) {
        auto it = grads.find(next);
        if (it == grads.end() || !it->second.defined())
          grads[next] = in_grads[i];
        else
          accumulate(it->second, in_grads[i]);
      }
      if (--deps[next] == 0) ready.push(next);
    }
  }
}

}  // namespace relpos
