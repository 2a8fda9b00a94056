// nn/optim/clip.h — gradient norm and clipping by the global L2 norm (PyTorch's
// torch.nn.utils.clip_grad_norm_ with norm_type 2):
//   total_norm = sqrt(sum over params p with a grad, over elements, of grad^2)
//                (squares summed in float64 on the grads' device, in a fixed order:
//                deterministic; one host read of the total)
//   clip_coef  = max_norm / (total_norm + 1e-6)
//   if clip_coef < 1: every grad *= clip_coef         (otherwise grads are untouched)
// Parameters without a grad are skipped; a parameter listed twice counts once. When
// total_norm is not finite (a NaN/inf gradient) nothing is scaled and the norm is returned
// as it is, so the caller can apply its NaN policy (skip the step, stop, ...).
#pragma once
#include <vector>

#include "autograd/variable.h"

namespace relpos::nn::optim {

// The global L2 norm of the grads of `params` (0 when none has a grad).
double grad_norm(const std::vector<Variable>& params);
// Its square as a float64 [] tensor on the grads' device, nothing read back (undefined when
// none has a grad): grad_norm == sqrt(grad_sq_sum(...).item()). Lets a caller read it
// together with other device values in one transfer.
Tensor grad_sq_sum(const std::vector<Variable>& params);

// Clips as above and returns the pre-clip norm. max_norm must be > 0 (+inf never clips).
// Scaling is in place (k::mul_) on each grad, except that a grad which shares its storage
// with a grad scaled before it in the list, or is not contiguous (it may alias itself
// through stride 0), is replaced by a scaled copy instead: this engine can hand the same
// gradient tensor to several leaves (both inputs of an add), and scaling that buffer once
// per leaf would scale it twice.
double clip_grad_norm(const std::vector<Variable>& params, double max_norm);
// Same, with the pre-clip norm already computed by grad_norm(params) (saves a second pass
// and host sync when the caller needed the norm first, e.g. for a non-finite check).
double clip_grad_norm(const std::vector<Variable>& params, double max_norm, double total_norm);

// Every grad of `params` times s (the fp16 loss-scale unscale); a parameter listed twice is
// scaled once, parameters without a grad are skipped.
void scale_grads(const std::vector<Variable>& params, double s);

}  // namespace relpos::nn::optim
