// kernels/cuda/common.cpp — host-side helpers of the CUDA backend (see host.h) and the error
// function the device side (launch.h) throws through.
#include <limits>

#include "kernels/cuda/host.h"

namespace relpos::k::cuda {

static_assert(int(DType::F32) == int(dev::DT::F32) && int(DType::F64) == int(dev::DT::F64) &&
              int(DType::I64) == int(dev::DT::I64));

namespace dev {
void throw_error(const char* op, const char* what, const char* status) {
  fail("{}: CUDA error in {}: {}", op, what, status);
}
void debug_sync(const char*) {
  relpos::cuda::synchronize();
  relpos::cuda::check_device_errors();
}
}  // namespace dev

dev::DT dt(DType t) { return dev::DT(int(t)); }

dev::Geom geom(const Shape& shape, const char* op) {
  RELPOS_CHECK(shape.size() <= size_t(dev::kMaxDims), "{}: cuda tensors of rank > {} are not supported (shape {})",
               op, dev::kMaxDims, shape_str(shape));
  dev::Geom g;
  g.ndim = int(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) g.shape[d] = shape[d];
  return g;
}

dev::Strides strides_of(const Tensor& t) {
  RELPOS_CHECK(t.dim() <= dev::kMaxDims, "cuda: tensors of rank > {} are not supported ({})", dev::kMaxDims,
               describe(t));
  dev::Strides s;
  for (int64_t d = 0; d < t.dim(); ++d) s.s[d] = t.strides()[size_t(d)];
  return s;
}

dev::Check device_check(std::function<std::string(uint64_t pos)> report) {
  const relpos::cuda::DeviceCheck c = relpos::cuda::begin_device_check(std::move(report));
  return {c.record, c.base};
}

int64_t element(const Tensor& t, uint64_t pos) {
  return int64_t(t.contiguous().reshape({-1}).at({int64_t(pos)}));
}

}  // namespace relpos::k::cuda
