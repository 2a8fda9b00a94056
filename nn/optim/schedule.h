// nn/optim/schedule.h — learning-rate schedules as pure functions of the step.
// `step` is the 0-based index of the optimizer step about to be taken (0 for the first
// update); W = warmup_steps, T = total_steps, r = min_lr_ratio, base = base_lr:
//   warmup (step < W):       lr = base * (step + 1) / W          (reaches base at step W - 1)
//   constant (step >= W):    lr = base
//   decay (step >= W), progress = min(1, (step - W) / (T - W)):
//     cosine:                lr = base * (r + (1 - r) * 0.5 * (1 + cos(pi * progress)))
//     linear:                lr = base * (r + (1 - r) * (1 - progress))
// so a decay schedule is at base at step W, at base * (1 + r) / 2 halfway (step W + (T-W)/2)
// and at base * r from step T on. Errors (relpos::Error) name the bad field: base_lr must
// be finite and > 0, warmup_steps >= 0, min_lr_ratio in [0, 1], total_steps > warmup_steps
// for the decay schedules (unused by constant), step >= 0.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "core/enum_names.h"

namespace relpos::nn::optim {

enum class LrSchedule { Constant, WarmupCosine, WarmupLinear };

struct ScheduleOptions {
  LrSchedule kind = LrSchedule::Constant;
  double base_lr = 1e-3;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // decay schedules: lr reaches base_lr * min_lr_ratio here
  double min_lr_ratio = 0.0;
};

// Throws relpos::Error naming the first invalid field.
void validate(const ScheduleOptions& s);
// The learning rate for `step` (validates s and step).
double lr_at(const ScheduleOptions& s, int64_t step);

// The same schedules as free functions.
double constant_lr(int64_t step, double base_lr, int64_t warmup_steps = 0);
double warmup_cosine_lr(int64_t step, double base_lr, int64_t warmup_steps, int64_t total_steps,
                        double min_lr_ratio = 0.0);
double warmup_linear_lr(int64_t step, double base_lr, int64_t warmup_steps, int64_t total_steps,
                        double min_lr_ratio = 0.0);

}  // namespace relpos::nn::optim

// optim.schedule's names.
template <>
struct relpos::EnumTable<relpos::nn::optim::LrSchedule> {
  static constexpr EnumName<nn::optim::LrSchedule> items[] = {{nn::optim::LrSchedule::Constant, "constant"},
                                                              {nn::optim::LrSchedule::WarmupCosine, "cosine"},
                                                              {nn::optim::LrSchedule::WarmupLinear, "linear"}};
};
