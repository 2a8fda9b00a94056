// bench/after_gemm.cpp — shows how an OpenMP-parallel op runs right after a multi-threaded
// GEMM. OpenBLAS (pthreads build) keeps its worker threads busy-waiting for a while after
// each GEMM (OPENBLAS_THREAD_TIMEOUT, 2^28 cycles by default); on a machine with as many
// cores as threads, the OpenMP workers of the next op then share cores with them.
//
// Usage: relpos_bench_after_gemm [--threads N] [--calls C]
// Prints the time of each of C back-to-back k::softmax calls on [4096, 256] (float32)
// issued (1) with no GEMM before and (2) right after 30 k::matmul calls of 512x512x512.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/tensor.h"
#include "kernels/ops.h"

using namespace relpos;

namespace {

void time_calls(const char* label, const Tensor& x, int calls) {
  std::printf("%s:", label);
  for (int i = 0; i < calls; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    Tensor y = k::softmax(x, -1);
    std::printf(" %.2f", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("  (ms per call)\n");
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, calls = 40;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--calls") == 0 && i + 1 < argc) calls = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--calls C]\n", argv[0]);
      return 2;
    }
  }
  k::set_num_threads(threads);
  Generator gen(7);
  Tensor a = Tensor::randn({512, 512}, gen), b = Tensor::randn({512, 512}, gen);
  Tensor x = Tensor::randn({4096, 256}, gen);
  std::printf("threads %d, softmax [4096, 256] float32\n", threads);
  for (int i = 0; i < 3; ++i) k::softmax(x, -1);  // start the OpenMP pool
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  time_calls("no GEMM before   ", x, calls);
  for (int i = 0; i < 30; ++i) k::matmul(a, b);
  time_calls("right after GEMMs", x, calls);
  return 0;
}
