// nn/positional/none.cpp — NoPE: no position information at all (a causal decoder can
// still infer positions from the mask; an encoder cannot).
#include "core/rng.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

namespace {
class NoPosition : public PositionEncoding {
 public:
  std::string type() const override { return "none"; }
};
}  // namespace

namespace {
PositionEncodingPtr make_none(const PositionConfig&, Generator&) {
  return std::make_shared<NoPosition>();
}
}  // namespace

PositionVariant none_encoding() {
  return {.name = "none",
          .description = "NoPE: no position information",
          .make = make_none,
          .fused_attention = true,
          .facts = {.no_bias_note = "no position information"}};
}

}  // namespace relpos::nn
