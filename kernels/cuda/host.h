// kernels/cuda/host.h — host-side helpers of the CUDA backend's entry points
// (kernels/cuda/*.cpp): tensors -> the raw descriptions of kernels/cuda/launch.h.
#pragma once
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
// A host vector of int64 uploaded to the device (empty vectors give a 1-element tensor so the
// pointer is valid).
Tensor upload(const std::vector<int64_t>& v);

}  // namespace relpos::k::cuda
