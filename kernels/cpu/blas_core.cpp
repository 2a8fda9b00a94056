// kernels/cpu/blas_core.cpp — make OpenBLAS run the GEMM kernels this CPU can execute.
//
// An OpenBLAS built with DYNAMIC_ARCH (Debian's is) picks its kernel set, the "core", from
// CPUID when the library loads. A release that does not know the CPU model falls back to an old
// core: Debian 12's OpenBLAS 0.3.21 runs its SSE3 "Prescott" kernels on an Emerald Rapids Xeon
// (family 6, model 207), 2.4-3.5x slower per training step than its AVX-512 "SkylakeX" kernels on
// the same machine (bench/RESULTS.md, "BLAS core"). OpenBLAS reads OPENBLAS_CORETYPE only while
// it loads, but DYNAMIC_ARCH builds export gotoblas_dynamic_quit / gotoblas_dynamic_init, which
// redo the choice. ensure_blas_core() does that once, before relpos's first BLAS call, when the
// loaded core is a fallback below AVX2 and the CPU has more, to the CPU's widest unit:
//   AVX-512 F/BW/VL/DQ -> SkylakeX,  AVX2 + FMA -> Haswell,  AVX -> Sandybridge.
// A user's own OPENBLAS_CORETYPE is left alone; RELPOS_BLAS_CORE=keep keeps the library's pick.
// The two functions are looked up with dlsym, so a BLAS without them (not OpenBLAS, or not
// DYNAMIC_ARCH) links and runs unchanged.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "core/env.h"
#include "kernels/backend.h"

namespace relpos::k {

namespace {

using CorenameFn = char* (*)();
using VoidFn = void (*)();

template <typename F>
F blas_symbol(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
}

// 3 = AVX-512, 2 = AVX2 + FMA, 1 = AVX, 0 = SSE only (what the kernels of a core use).
int tier_of_core(const std::string& core) {
  for (const char* c : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    if (core == c) return 3;
  for (const char* c : {"Haswell", "Zen", "Excavator", "Steamroller"})
    if (core == c) return 2;
  for (const char* c : {"Sandybridge", "Bulldozer", "Piledriver"})
    if (core == c) return 1;
  return 0;
}

int cpu_tier() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return 3;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 2;
  if (__builtin_cpu_supports("avx")) return 1;
#endif
  return 0;
}

const char* tier_core(int tier) { return tier == 3 ? "SkylakeX" : tier == 2 ? "Haswell" : "Sandybridge"; }

BlasCore g_core;
std::once_flag g_once;

void select_core() {
  const auto corename = blas_symbol<CorenameFn>("openblas_get_corename");
  if (!corename) {
    g_core.library = "not OpenBLAS";
    return;
  }
  g_core.library = "OpenBLAS";
  g_core.loaded = corename();
  g_core.core = g_core.loaded;
  g_core.cpu_tier = cpu_tier();
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  const std::string mode = env_value("RELPOS_BLAS_CORE");  // "" or "keep" (core/env.cpp)
  if (user) {
    g_core.note = "OPENBLAS_CORETYPE set by the user";
    return;
  }
  if (mode == "keep") {
    g_core.note = "RELPOS_BLAS_CORE=keep";
    return;
  }
  // Only a fallback is replaced: a core below AVX2 on a CPU with more. A reasonable pick (say
  // Haswell kernels on an AVX-512 CPU that OpenBLAS maps to them) is the library's call.
  if (tier_of_core(g_core.loaded) >= std::min(g_core.cpu_tier, 2)) return;
  const auto quit = blas_symbol<VoidFn>("gotoblas_dynamic_quit");
  const auto init = blas_symbol<VoidFn>("gotoblas_dynamic_init");
  if (!quit || !init) {
    g_core.note = "the library cannot switch cores (not a DYNAMIC_ARCH build)";
    return;
  }
  const char* want = tier_core(g_core.cpu_tier);
  setenv("OPENBLAS_CORETYPE", want, 1);  // read by gotoblas_dynamic_init
  quit();
  init();
  unsetenv("OPENBLAS_CORETYPE");
  g_core.core = corename();
  g_core.note = g_core.core == want ? "switched by relpos: the library's CPU detection chose " + g_core.loaded
                                    : std::string("could not switch to ") + want;
}

}  // namespace

const BlasCore& ensure_blas_core() {
  std::call_once(g_once, select_core);
  return g_core;
}

int BlasCore::core_tier() const { return tier_of_core(core); }

}  // namespace relpos::k
