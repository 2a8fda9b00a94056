#include "old.h"
#include "new.h"
#include <chrono>
#include <cstdio>
#include <vector>
#include <random>
using clk = std::chrono::steady_clock;
__attribute__((noinline)) void o2(const float* x, float* y, float* g, long n) {
#pragma omp simd
  for (long i = 0; i < n; ++i) oldf::gelu_erf_and_grad_f32(x[i], y[i], g[i]);
}
__attribute__((noinline)) void n2(const float* x, float* y, float* g, long n) {
#pragma omp simd
  for (long i = 0; i < n; ++i) newf::gelu_erf_and_grad_f32(x[i], y[i], g[i]);
}
__attribute__((noinline)) void o1(const float* x, float* y, long n) {
#pragma omp simd
  for (long i = 0; i < n; ++i) y[i] = oldf::gelu_erf_f32(x[i]);
}
__attribute__((noinline)) void n1(const float* x, float* y, long n) {
#pragma omp simd
  for (long i = 0; i < n; ++i) y[i] = newf::gelu_erf_f32(x[i]);
}
int main() {
  long n = 1 << 20;
  std::vector<float> x(n), y(n), g(n);
  std::mt19937 r(1); std::normal_distribution<float> d(0, 2);
  for (auto& v : x) v = d(r);
  auto T = [&](auto f) { auto t0 = clk::now(); for (int k = 0; k < 20; ++k) f(); return std::chrono::duration<double, std::milli>(clk::now() - t0).count() / 20; };
  for (int k = 0; k < 5; ++k)
    std::printf("1M: val+grad old %.3f new %.3f ms | val old %.3f new %.3f ms\n", T([&] { o2(x.data(), y.data(), g.data(), n); }),
                T([&] { n2(x.data(), y.data(), g.data(), n); }), T([&] { o1(x.data(), y.data(), n); }), T([&] { n1(x.data(), y.data(), n); }));
}
