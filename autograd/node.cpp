#include "autograd/node.h"

#include <atomic>

#include "autograd/variable.h"
#include "kernels/ops.h"

namespace relpos {

static std::atomic<uint64_t> g_next_seq{0};

Node::Node(std::string name) : name_(std::move(name)), seq_(g_next_seq++) {}

SavedTensor::SavedTensor(const Tensor& t, const char* op)
    : t_(t), version_(t.defined() ? t.version() : 0), op_(op) {}

const Tensor& SavedTensor::get() const {
  if (t_.defined() && t_.version() != version_)
    fail("{}: a tensor saved for backward was modified by an in-place operation "
         "(saved at version {}, now at version {}); clone it before modifying it",
         op_, version_, t_.version());
  return t_;
}

std::vector<Tensor> FunctionNode::apply(const Tensor& grad_output) {
  if (!fn_)
    fail("{}: trying to backward through the graph a second time, but its saved tensors "
         "were freed by the first backward; call backward(grad, /*retain_graph=*/true) the "
         "first time",
         name());
  return fn_(grad_output);
}

AccumulateGrad::AccumulateGrad(std::weak_ptr<VariableImpl> var)
    : Node("AccumulateGrad"), var_(std::move(var)) {}

std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad_output) {
  auto v = var_.lock();
  if (!v) return {};
  Tensor g = grad_output;
  for (auto& hook : v->hooks) {
    Tensor r = hook(g);
    if (r.defined()) g = r;
  }
  RELPOS_CHECK(g.shape() == v->data.shape(), "AccumulateGrad: gradient {} does not match leaf {}{}",
               shape_str(g.shape()), shape_str(v->data.shape()), v->name.empty() ? "" : " '" + v->name + "'");
  // A leaf owns its .grad: the incoming tensor may alias another leaf's gradient (add's
  // backward hands the same tensor to both inputs) or a view of the graph's buffers, so the
  // first gradient is copied unless nothing else can see it (owned_by_leaf); later ones are
  // added out of place, so references taken earlier keep their values. Optimizers and clipping
  // may then modify .grad in place.
  if (!v->grad.defined())
    v->grad = owned_by_leaf(g, grad_output) ? g : g.clone();
  else
    v->grad = k::add(v->grad, g);
  return {};
}

// The first gradient can become .grad without a copy when its storage is held only by the
// engine's handle (grad_output) and this call's own (g; or g alone where a hook returned a new
// tensor) — not by another edge's gradient, a hook or a saved tensor — and g is the whole
// storage, dense: the same values either way, without a serial copy of every parameter's
// gradient each step (perf: ~0.6% of a small float32 step in Tensor::clone).
bool AccumulateGrad::owned_by_leaf(const Tensor& g, const Tensor& grad_output) {
  const long handles = g.shares_storage(grad_output) ? 2 : 1;
  return g.storage().use_count() == handles && g.offset() == 0 && g.is_contiguous() &&
         size_t(g.numel()) * dtype_size(g.dtype()) == g.storage()->nbytes();
}

}  // namespace relpos
