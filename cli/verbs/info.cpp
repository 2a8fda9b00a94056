// relpos info
// Version, commit, build, BLAS (library, core, threading), the CPU GEMM per precision, the fused
// attention's tile kernels, CPU threads, CUDA, MPI, SentencePiece, devices.
#include <fmt/format.h>

#include "cli/command.h"
#include "core/cuda_runtime.h"
#include "core/env.h"
#include "kernels/ops.h"
#include "relpos/version.h"
#include "relpos_build_info.h"
#include "trainers/data/tokenizer.h"
#ifdef RELPOS_WITH_MPI
#include "trainers/dist/mpi/comm_mpi.h"
#endif

#if defined(RELPOS_BLAS_IS_OPENBLAS)
extern "C" char* openblas_get_config(void);
extern "C" int openblas_get_parallel(void);
#endif

namespace relpos::cli {
namespace {

std::string blas_description() {
#if defined(RELPOS_BLAS_IS_OPENBLAS)
  const int par = openblas_get_parallel();
  return fmt::format("{} ({}; threading: {})", RELPOS_BLAS_VENDOR, openblas_get_config(),
                     par == 0   ? "sequential"
                     : par == 1 ? "pthreads"
                     : par == 2 ? "OpenMP"
                                : "unknown");
#else
  return fmt::format("{} ({})", RELPOS_BLAS_VENDOR, RELPOS_BLAS_LIBRARIES);
#endif
}

// Returns false when a CUDA device is present but cuBLAS does not load (every CUDA matmul
// would fail): `relpos info` then exits 1, so a GPU check cannot read it as healthy.
bool print_devices() {
  const std::string cuda_libs = cuda::built_with_cuda() ? k::cuda_library_info() : "";
  fmt::print("CUDA:         {}\n", cuda::built_with_cuda()
                                       ? fmt::format("built; {}; {}", cuda::runtime_version(), cuda_libs)
                                       : std::string("not built"));
#ifdef RELPOS_WITH_MPI
  fmt::print("MPI:          built; {} (data-parallel: mpirun -np N relpos train)\n", train::mpi_library_version());
#else
  fmt::print("MPI:          built without (RELPOS_MPI=OFF)\n");
#endif
  const train::SubwordBackend* sp = train::subword_backend();
  fmt::print("Subwords:     {}\n", sp ? sp->library + " (data.tokenizer.type sentencepiece)"
                                       : std::string("built without SentencePiece (RELPOS_SENTENCEPIECE=OFF)"));
  const auto devs = cuda::devices();
  fmt::print("CUDA devices: {}\n", devs.size());
  for (const auto& d : devs)
    fmt::print("  cuda:{}  {}  compute capability {}.{}, {} SMs, {:.1f} GiB ({:.1f} GiB free)\n", d.index, d.name,
               d.cc_major, d.cc_minor, d.multiprocessors, double(d.total_memory) / double(1ull << 30),
               double(d.free_memory) / double(1ull << 30));
  if (!devs.empty() && cuda_libs.rfind("cuBLAS not loadable", 0) == 0) {
    fmt::print(stderr, "relpos info: {} CUDA device(s), but {}\n", devs.size(), cuda_libs);
    return false;
  }
  return true;
}

int run() {
  const k::BlasCore& core = k::ensure_blas_core();  // before the BLAS line: it names the core
  fmt::print("relpos {}\n", RELPOS_VERSION);
  fmt::print("git commit:   {}\n", RELPOS_GIT_COMMIT);
  fmt::print("build type:   {}{}\n", RELPOS_BUILD_TYPE,
             std::string(RELPOS_NATIVE_BUILD) == "ON" ? " (-march=native)" : "");
  fmt::print("compiler:     {} (C++{})\n", RELPOS_COMPILER, __cplusplus / 100 % 100);
  fmt::print("BLAS:         {}\n", blas_description());
  fmt::print("BLAS library: {}\n", RELPOS_BLAS_LIBRARIES);
  static const char* const kTier[] = {"SSE", "AVX", "AVX2+FMA", "AVX-512"};
  if (core.library == "OpenBLAS")
    fmt::print("BLAS core:    {} ({} kernels; CPU: {}){}\n", core.core, kTier[core.core_tier()], kTier[core.cpu_tier],
               core.note.empty() ? "" : "; " + core.note);
  // The GEMM behind a CPU matmul, per train.precision (kernels/cpu/gemm.h); fp16 has no CPU
  // 16-bit path, so its line says how its values are multiplied.
  fmt::print("CPU GEMM fp32: {}\n", k::cpu_gemm_path(k::GemmInputs::F32));
  fmt::print("CPU GEMM bf16: {}\n", k::cpu_gemm_path(k::GemmInputs::BF16));
  fmt::print("CPU GEMM fp16: {}\n", k::cpu_gemm_path(k::GemmInputs::FP16));
  fmt::print("CPU attention tiles: {}\n", k::cpu_attention_tile_path());
  fmt::print("CPU threads:  {} (OpenMP)\n", k::num_threads());
  fmt::print("op profile:   {} (RELPOS_OP_PROFILE=1: every op timed, one table at exit)\n",
             k::op_profile_on() ? "on" : "off");
  const bool devices_ok = print_devices();
  // Every environment switch of the table (core/env.cpp) and its value here (validated at startup).
  fmt::print("environment:\n");
  for (const EnvSwitch& s : env_switches()) {
    const std::string v = env_value(s.name);
    fmt::print("  {:<26} {}\n", s.name, v.empty() ? "(unset)" : echo_value(v));
  }
  return devices_ok ? 0 : 1;
}

Action setup(CLI::App&) {
  return [](Context&) { return run(); };
}

}  // namespace

Command info_command() {
  return {"info", "print build and device information", setup};
}

}  // namespace relpos::cli
