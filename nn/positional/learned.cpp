// nn/positional/learned.cpp — learned absolute position embeddings E: [max_len, D], added to
// the token embeddings: x[b, t] += E[offset + t]. No extrapolation: positions beyond
// max_len are an error. Gradient: dE[p] = sum over (b, t) at position p of dx (scatter-add).
// Parameters: max_len (default: the model's max_len).
#include "autograd/ops.h"
#include "core/rng.h"
#include "nn/init.h"
#include "nn/positional/position_encoding.h"
#include "nn/positional/registry.h"

namespace relpos::nn {

namespace {
class Learned : public PositionEncoding {
 public:
  Learned(int64_t max_len, int64_t d_model, double std, Generator& gen, DType dtype) : max_len_(max_len) {
    table_ = register_parameter("table", init::normal({max_len, d_model}, std, gen, dtype), group::kPosition);
  }
  std::string type() const override { return "learned"; }
  bool is_absolute() const override { return true; }

  Variable embed(const Variable& x, int64_t offset) const override {  // x: [B, L, D]
    const int64_t L = x.size(1);
    RELPOS_CHECK(offset >= 0 && offset + L <= max_len_,
                 "position 'learned': positions {}..{} exceed the table's max_len {} (learned absolute "
                 "positions cannot extrapolate; raise max_len)",
                 offset, offset + L - 1, max_len_);
    return x + embedding(table_, cached("learned.positions", {L, offset}, [&] { return Tensor::arange(offset, offset + L); }));
  }

 private:
  int64_t max_len_;
  Variable table_;
};
}  // namespace

namespace {
PositionEncodingPtr make_learned(const PositionConfig& cfg, Generator& gen) {
  int64_t max_len = cfg.params.get_int("max_len", cfg.max_len);
  RELPOS_CHECK_CONFIG(max_len > 0, "position 'learned': max_len must be positive, got {}", max_len);
  return std::make_shared<Learned>(max_len, cfg.d_model, cfg.init_std, gen, cfg.dtype);
}
}  // namespace

PositionVariant learned_encoding() {
  return {.name = "learned",
          .description = "learned absolute position embeddings [max_len, D]",
          .params = {param::integer("max_len", Computed{"model.max_len"},
                                    "rows of the learned table [max_len, D]; longer inputs are an error")
                         .rows()},
          .make = make_learned,
          .fused_attention = true,
          .facts = {.bounded_by_max_len = true}};
}

}  // namespace relpos::nn
