// kernels/cpu/threads.cpp — one knob for OpenMP loops and OpenBLAS threads.
#include <cblas.h>
#include <omp.h>

#include "kernels/ops.h"

namespace relpos::k {

void set_num_threads(int n) {
  RELPOS_CHECK(n >= 1, "set_num_threads: need at least 1 thread, got {}", n);
  ensure_blas_core();
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

namespace {
bool g_allow_tf32 = false;
}  // namespace
void set_allow_tf32(bool allow) { g_allow_tf32 = allow; }
bool allow_tf32() { return g_allow_tf32; }

}  // namespace relpos::k
