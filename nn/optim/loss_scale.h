// nn/optim/loss_scale.h — dynamic loss scaling for float16 training (PyTorch's GradScaler):
// the loss is multiplied by `scale` before backward so small gradients survive float16; the
// gradients are divided by it before clipping and the update. A step whose gradients are not
// all finite is an overflow: the update is skipped and the scale halves. After `interval`
// finite steps in a row the scale doubles. bfloat16 (float32's range) needs none.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace relpos::nn::optim {

class LossScaler {
 public:
  static constexpr double kGrowth = 2.0, kBackoff = 0.5;

  LossScaler(double init_scale, int64_t interval) : scale_(init_scale), interval_(interval) {
    RELPOS_CHECK(std::isfinite(init_scale) && init_scale > 0, "loss scale must be finite and > 0, got {}",
                 init_scale);
    RELPOS_CHECK(interval >= 1, "loss scale growth interval must be >= 1, got {}", interval);
  }
  double scale() const { return scale_; }
  int64_t good_steps() const { return good_; }
  // After a step: `finite` says whether every gradient was finite.
  void update(bool finite) {
    if (!finite) {
      scale_ *= kBackoff;
      good_ = 0;
      return;
    }
    if (++good_ >= interval_) {
      if (std::isfinite(scale_ * kGrowth)) scale_ *= kGrowth;
      good_ = 0;
    }
  }
  // Checkpointed state (resume continues the same sequence of scales).
  void restore(double scale, int64_t good_steps) {
    RELPOS_CHECK(std::isfinite(scale) && scale > 0 && good_steps >= 0 && good_steps < interval_,
                 "loss scale state: scale {} and good steps {} (interval {}) are not a valid state", scale,
                 good_steps, interval_);
    scale_ = scale;
    good_ = good_steps;
  }

 private:
  double scale_;
  int64_t interval_;
  int64_t good_ = 0;
};

}  // namespace relpos::nn::optim
