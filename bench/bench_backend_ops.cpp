// bench/bench_backend_ops.cpp — the perf mode of the backend test harness: every case of
// relpos::cases::perf_cases() (tests/support/backend_cases.h, training-size shapes) on every
// available backend, reported as GFLOP/s (matmuls) or GB/s (everything else: bytes of the
// logical inputs and outputs, read/written once). Timings only; nothing is asserted.
//   relpos_bench_backend_ops [--filter SUBSTRING] [--min-seconds S]
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <string>

#include "backend_cases.h"
#include "core/cuda_runtime.h"
#include "kernels/ops.h"

using namespace relpos;

namespace {

double bytes_of(const std::vector<Tensor>& ts) {
  double b = 0;
  for (const Tensor& t : ts) b += double(t.numel()) * double(dtype_size(t.dtype()));
  return b;
}

void sync(Device d) {
  if (d == Device::CUDA) cuda::synchronize();
}

}  // namespace

int main(int argc, char** argv) {
  std::string filter;
  double min_seconds = 0.3;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
    else if (!std::strcmp(argv[i], "--min-seconds") && i + 1 < argc) min_seconds = std::stod(argv[++i]);
    else {
      fmt::print("usage: {} [--filter SUBSTRING] [--min-seconds S]\n", argv[0]);
      return 2;
    }
  }
  std::vector<Device> devices{Device::CPU};
  if (cuda::available()) devices.push_back(Device::CUDA);
  else fmt::print("# no CUDA device ({}): cpu only\n", cuda::runtime_version());
  fmt::print("{:<8} {:<48} {:>10} {:>12}\n", "backend", "case (float32)", "ms/run", "throughput");
  for (const cases::OpCase& c : cases::perf_cases()) {
    if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
    for (Device dev : devices) {
      try {
        std::vector<Tensor> in = cases::make_inputs(c, DType::F32, dev);
        std::vector<Tensor> out = c.run(in, dev);  // warm-up (and the output sizes)
        sync(dev);
        const double bytes = bytes_of(in) + bytes_of(out);
        int runs = 0;
        const auto t0 = std::chrono::steady_clock::now();
        double elapsed = 0;
        do {
          out = c.run(in, dev);
          ++runs;
          if (runs % 4 == 0 || dev == Device::CPU) sync(dev);
          elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        } while (elapsed < min_seconds && runs < 1000);
        sync(dev);
        elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double per = elapsed / runs;
        const std::string tp = c.flops > 0 ? fmt::format("{:.1f} GFLOP/s", c.flops / per * 1e-9)
                                           : fmt::format("{:.1f} GB/s", bytes / per * 1e-9);
        fmt::print("{:<8} {:<48} {:>10.3f} {:>12}\n", device_name(dev), c.name, per * 1e3, tp);
      } catch (const std::exception& e) {
        fmt::print("{:<8} {:<48} failed: {}\n", device_name(dev), c.name, e.what());
      }
    }
  }
  return 0;
}
