// nn/positional/none.cpp — NoPE: no position information at all (a causal decoder can
// still infer positions from the mask; an encoder cannot).
#include "nn/positional/position_encoding.h"
#include "core/rng.h"

namespace relpos::nn {

namespace {
class NoPosition : public PositionEncoding {
 public:
  std::string type() const override { return "none"; }
};
}  // namespace

PositionEncodingPtr make_none(const PositionConfig& cfg, Generator&) {
  cfg.params.check_known("position 'none'", {});
  return std::make_shared<NoPosition>();
}

}  // namespace relpos::nn
