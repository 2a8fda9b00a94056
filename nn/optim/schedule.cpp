#include "nn/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace relpos::nn::optim {

void validate(const ScheduleOptions& s) {
  const std::string_view kind = enum_name(s.kind);
  RELPOS_CHECK(std::isfinite(s.base_lr) && s.base_lr > 0, "lr schedule '{}': base_lr must be finite and > 0, got {}",
               kind, s.base_lr);
  RELPOS_CHECK(s.warmup_steps >= 0, "lr schedule '{}': warmup_steps must be >= 0, got {}", kind, s.warmup_steps);
  RELPOS_CHECK(s.min_lr_ratio >= 0 && s.min_lr_ratio <= 1, "lr schedule '{}': min_lr_ratio must be in [0, 1], got {}",
               kind, s.min_lr_ratio);
  if (s.kind != LrSchedule::Constant)
    RELPOS_CHECK(s.total_steps > s.warmup_steps,
                 "lr schedule '{}': total_steps ({}) must be greater than warmup_steps ({})", kind, s.total_steps,
                 s.warmup_steps);
}

double lr_at(const ScheduleOptions& s, int64_t step) {
  validate(s);
  RELPOS_CHECK(step >= 0, "lr schedule '{}': step must be >= 0, got {}", enum_name(s.kind), step);
  if (step < s.warmup_steps) return s.base_lr * double(step + 1) / double(s.warmup_steps);
  if (s.kind == LrSchedule::Constant) return s.base_lr;
  const double progress =
      std::min(1.0, double(step - s.warmup_steps) / double(s.total_steps - s.warmup_steps));
  const double r = s.min_lr_ratio;
  const double shape = s.kind == LrSchedule::WarmupCosine ? 0.5 * (1.0 + std::cos(std::numbers::pi * progress))
                                                          : 1.0 - progress;
  return s.base_lr * (r + (1.0 - r) * shape);
}

double constant_lr(int64_t step, double base_lr, int64_t warmup_steps) {
  return lr_at({LrSchedule::Constant, base_lr, warmup_steps, 0, 0.0}, step);
}

double warmup_cosine_lr(int64_t step, double base_lr, int64_t warmup_steps, int64_t total_steps,
                        double min_lr_ratio) {
  return lr_at({LrSchedule::WarmupCosine, base_lr, warmup_steps, total_steps, min_lr_ratio}, step);
}

double warmup_linear_lr(int64_t step, double base_lr, int64_t warmup_steps, int64_t total_steps,
                        double min_lr_ratio) {
  return lr_at({LrSchedule::WarmupLinear, base_lr, warmup_steps, total_steps, min_lr_ratio}, step);
}

}  // namespace relpos::nn::optim
