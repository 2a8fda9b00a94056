// kernels/cuda/host.h — host-side helpers of the CUDA backend's entry points
// (kernels/cuda/*.cpp): tensors -> the raw descriptions of kernels/cuda/launch.h.
#pragma once
#include <functional>
#include <string>

#include "core/cuda_runtime.h"
#include "kernels/backend.h"
#include "kernels/cuda/launch.h"

namespace relpos::k::cuda {

dev::DT dt(DType t);
// The shape as a launch geometry; an error naming op when rank > dev::kMaxDims.
dev::Geom geom(const Shape& shape, const char* op);
// t's strides (t already has the geometry's shape, e.g. after expand()).
dev::Strides strides_of(const Tensor& t);
// A fresh (uninitialised / zeroed) tensor on the CUDA device.
inline Tensor empty_cuda(const Shape& shape, DType dtype) { return Tensor::empty(shape, dtype, Device::CUDA); }
inline Tensor zeros_cuda(const Shape& shape, DType dtype) { return Tensor::zeros(shape, dtype, Device::CUDA); }
// Register a device-side check for one launch (core/cuda_runtime.h, begin_device_check):
// report(pos) builds the CPU backend's message for a failure at element pos.
dev::Check device_check(std::function<std::string(uint64_t pos)> report);
// t's element at row-major position pos, read to the host (for error messages only).
int64_t element(const Tensor& t, uint64_t pos);

}  // namespace relpos::k::cuda
