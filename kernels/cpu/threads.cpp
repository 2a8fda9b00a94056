// kernels/cpu/threads.cpp — one knob for OpenMP loops and OpenBLAS threads.
#include <cblas.h>
#include <omp.h>

#include "kernels/ops.h"

namespace relpos::k {

void set_num_threads(int n) {
  RELPOS_CHECK(n >= 1, "set_num_threads: need at least 1 thread, got {}", n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace relpos::k
