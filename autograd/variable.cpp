#include "autograd/variable.h"

#include "autograd/engine.h"

namespace relpos {

Variable::Variable(Tensor data, bool requires_grad) : impl_(std::make_shared<VariableImpl>()) {
  check_defined(data, "Variable", "data");
  impl_->data = std::move(data);
  set_requires_grad(requires_grad);
}

Variable& Variable::set_requires_grad(bool r) {
  RELPOS_CHECK(is_leaf() || r, "set_requires_grad(false) is only allowed on leaves; use detach()");
  RELPOS_CHECK(!r || is_floating(impl_->data.dtype()),
               "only floating tensors can require grad (got {})", describe(impl_->data));
  impl_->requires_grad = r;
  return *this;
}

void Variable::backward(const Tensor& grad_output, bool retain_graph) const {
  Engine::backward(*this, grad_output, retain_graph);
}

Variable Variable::detach() const { return Variable(impl_->data, false); }

void Variable::register_hook(GradHook fn) const {
  RELPOS_CHECK(requires_grad(), "register_hook: the variable does not require grad");
  if (is_leaf())
    impl_->hooks.push_back(std::move(fn));
  else
    impl_->grad_fn->pre_hooks().push_back(std::move(fn));
}

Edge Variable::gradient_edge() const {
  if (!impl_->requires_grad) return {};
  if (impl_->grad_fn) return {impl_->grad_fn};
  std::shared_ptr<Node> acc = impl_->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(impl_);
    impl_->grad_accumulator = acc;
  }
  return {acc};
}

void Variable::set_grad_fn(std::shared_ptr<Node> fn) const {
  impl_->grad_fn = std::move(fn);
  impl_->requires_grad = impl_->grad_fn != nullptr;
}

}  // namespace relpos
