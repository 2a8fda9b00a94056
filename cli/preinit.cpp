// cli/preinit.cpp — runs before any shared library is initialised (the executable's
// .preinit_array): sizes the BLAS and OpenMP thread pools to the process's address-space
// limit. OpenBLAS's initialiser maps a work buffer per thread (128 MiB each in Debian's
// build) and retries a failed mapping forever, so under `ulimit -v` (RLIMIT_AS) or
// RLIMIT_DATA a process with all cores' buffers would spin at full CPU before main() runs.
// Here, with the libraries mapped but not yet started: when the limit leaves room for fewer
// threads than would start, the process starts again with OMP_NUM_THREADS and
// OPENBLAS_NUM_THREADS set to what fits (a user's explicit larger OMP_NUM_THREADS is an error);
// when it leaves room for none, a clear error and exit 2. The memory check of every verb (trainers/io/available_memory.h) then sees what is left.
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>

namespace {

constexpr long long kMiB = 1LL << 20;
constexpr long long kPerThread = 130 * kMiB;  // OpenBLAS's 128 MiB buffer + a thread's own
constexpr long long kWorking = 16 * kMiB;     // the least the program itself needs

long long vm_size() {  // VmSize of /proc/self/status, bytes (0: unknown)
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  long long kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmSize:", 7) == 0) kb = std::atoll(line + 7);
  std::fclose(f);
  return kb * 1024;
}

void say(const char* s) { (void)!::write(2, s, std::strlen(s)); }

void size_pools(int, char** argv, char** envp) {
  long long limit = -1;
  const char* which = "";
  for (const auto& [res, name] :
       {std::pair{RLIMIT_AS, "RLIMIT_AS (ulimit -v)"}, std::pair{RLIMIT_DATA, "RLIMIT_DATA (ulimit -d)"}}) {
    rlimit rl{};
    if (getrlimit(res, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (limit < 0 || (long long)rl.rlim_cur < limit))
      limit = (long long)rl.rlim_cur, which = name;
  }
  if (limit < 0) return;
  const long long left = limit - vm_size();
  const char* user = nullptr;  // getenv cannot be used yet (libc sets environ up after this)
  for (char** e = envp; e && *e; ++e)
    if (std::strncmp(*e, "OMP_NUM_THREADS=", 16) == 0) user = *e + 16;
  long long want = user && *user ? std::atoll(user) : 0;
  if (want <= 0) {
    cpu_set_t set;
    want = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
  }
  const long long fits = (left - kWorking) / kPerThread;
  char msg[512];
  if (fits < 1) {
    std::snprintf(msg, sizeof msg,
                  "error: %s is %lld MiB and leaves %lld MiB to relpos; its BLAS library maps %lld MiB per thread at "
                  "startup, so at least %lld MiB are needed: raise the limit\n",
                  which, limit / kMiB, left > 0 ? left / kMiB : 0, kPerThread / kMiB,
                  (limit - left + kWorking + kPerThread) / kMiB + 1);
    say(msg);
    ::_exit(2);
  }
  if (want <= fits) return;
  if (user && *user) {
    std::snprintf(msg, sizeof msg,
                  "error: OMP_NUM_THREADS=%s: %s is %lld MiB, room for %lld thread(s) (%lld MiB each for the BLAS "
                  "library's buffers); lower OMP_NUM_THREADS or raise the limit\n",
                  user, which, limit / kMiB, fits, kPerThread / kMiB);
    say(msg);
    ::_exit(2);
  }
  // The environment cannot be changed here for the libraries (libc's own initialiser, which runs
  // next, starts again from the original one): the process starts again with the thread counts
  // that fit, before anything has run. Then want == fits and nothing happens.
  char omp[48], blas[48];
  std::snprintf(omp, sizeof omp, "OMP_NUM_THREADS=%lld", fits);
  std::snprintf(blas, sizeof blas, "OPENBLAS_NUM_THREADS=%lld", fits);
  size_t n = 0;
  while (envp && envp[n]) ++n;
  char** env = static_cast<char**>(std::calloc(n + 3, sizeof(char*)));
  if (!env) return;
  size_t k = 0;
  for (size_t i = 0; i < n; ++i)
    if (std::strncmp(envp[i], "OMP_NUM_THREADS=", 16) != 0 && std::strncmp(envp[i], "OPENBLAS_NUM_THREADS=", 21) != 0)
      env[k++] = envp[i];
  env[k++] = omp;
  env[k++] = blas;
  env[k] = nullptr;
  ::execve("/proc/self/exe", argv, env);
  std::free(env);  // no /proc: go on with what would start (it may not fit)
}

}  // namespace

__attribute__((section(".preinit_array"), used)) static void (*relpos_preinit)(int, char**, char**) = size_pools;
