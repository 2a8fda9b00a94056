// trainers/dist/comm.cpp — see comm.h.
#include "trainers/dist/comm.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace relpos::train {

void SingleProcess::abort(int code, const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::exit(code);
}

int launcher_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const char* v = std::getenv(var);
    if (!v || !*v) continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end && *end == '\0' && n >= 1 && n <= 1 << 20) return int(n);
  }
  return 1;
}

}  // namespace relpos::train
