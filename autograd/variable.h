// autograd/variable.h — a Tensor that takes part in reverse-mode autograd: its data, its
// accumulated grad, whether it requires grad, and (for non-leaves) the Node that made it.
// Copies of a Variable share one VariableImpl (like flashlight's fl::Variable).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "core/tensor.h"

namespace relpos {

struct VariableImpl {
  Tensor data;
  Tensor grad;
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;             // null for leaves
  std::weak_ptr<Node> grad_accumulator;      // leaves: shared by every use
  std::vector<GradHook> hooks;               // leaves: run by AccumulateGrad
  std::string name;
};

class Variable {
 public:
  Variable() = default;
  explicit Variable(Tensor data, bool requires_grad = false);

  bool defined() const { return impl_ != nullptr; }
  const Tensor& data() const { return impl_->data; }
  const Tensor& grad() const { return impl_->grad; }
  // A leaf owns its gradient: set_grad stores a contiguous copy (never an alias), so
  // optimizers and clipping can update .grad in place.
  void set_grad(const Tensor& g) const { impl_->grad = g.defined() ? g.clone() : Tensor(); }
  void zero_grad() const { impl_->grad = Tensor(); }
  // Replace the data of a leaf (Module::to moving parameters between devices); every copy of
  // this Variable (optimizers hold them) sees the new tensor. The gradient is dropped.
  void set_data(Tensor t) const {
    RELPOS_CHECK(is_leaf(), "set_data: '{}' is not a leaf", impl_->name);
    impl_->data = std::move(t);
    impl_->grad = Tensor();
  }
  bool requires_grad() const { return impl_->requires_grad; }
  Variable& set_requires_grad(bool r);
  bool is_leaf() const { return impl_->grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return impl_->grad_fn; }
  const std::string& name() const { return impl_->name; }
  Variable& set_name(std::string n) { impl_->name = std::move(n); return *this; }

  const Shape& shape() const { return impl_->data.shape(); }
  int64_t dim() const { return impl_->data.dim(); }
  int64_t size(int64_t d) const { return impl_->data.size(d); }
  int64_t numel() const { return impl_->data.numel(); }
  DType dtype() const { return impl_->data.dtype(); }
  Device device() const { return impl_->data.device(); }
  double item() const { return impl_->data.item(); }

  // Reverse-mode backward from this variable. grad_output defaults to 1 for a one-element
  // variable. Without retain_graph the graph's saved tensors are freed afterwards and a
  // second backward through it throws.
  void backward(const Tensor& grad_output = Tensor(), bool retain_graph = false) const;
  // A new leaf sharing this data, cut from the graph.
  Variable detach() const;
  // Run fn on the gradient w.r.t. this variable when it is computed (it may return a
  // replacement gradient, or an undefined tensor to keep it).
  void register_hook(GradHook fn) const;

  // The edge through which a gradient reaches this variable (null fn if none needed).
  Edge gradient_edge() const;
  // Internal: make this the output of `fn`.
  void set_grad_fn(std::shared_ptr<Node> fn) const;
  bool same(const Variable& o) const { return impl_ == o.impl_; }

 private:
  std::shared_ptr<VariableImpl> impl_;
};

}  // namespace relpos
