// autograd/grad_mode.h — whether ops record the graph (thread-local, on by default).
#pragma once

namespace relpos {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// RAII: disable graph recording in this scope (optimizer steps, evaluation).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace relpos
