// autograd/ops/rotary.cpp — rotary position encoding in one pass (k::rotary).
//   forward:  y = R x, R block-diagonal with the 2x2 blocks [[c, -s], [s, c]] of each
//             (position, pair); channels past the rotated ones pass through
//   backward: dx = R^T g, the same pass with s negated (exact for any c, s: scales folded in,
//             e.g. YaRN's mscale, need no special case)
// The cos/sin table is a constant (built from fixed frequencies), so it gets no gradient.
#include "autograd/function.h"
#include "autograd/ops.h"

namespace relpos {

Variable rotary(const Variable& x, const Tensor& cs, bool interleaved) {
  return make_result(k::rotary(x.data(), cs, interleaved, false), "rotary", {x},
                     [cs, interleaved](const Tensor& g) -> std::vector<Tensor> {
                       return {k::rotary(g, cs, interleaved, true)};
                     });
}

}  // namespace relpos
