// core/host_device.h — RELPOS_HOST_DEVICE marks a function that nvcc compiles for the host and
// the device alike (the counter-based draw of core/rng.h, the Adam step of kernels/adam_math.h);
// empty for every other compiler.
#pragma once

#if defined(__CUDACC__)
#define RELPOS_HOST_DEVICE __host__ __device__
#else
#define RELPOS_HOST_DEVICE
#endif
