// core/tensor.h — the n-d array of relpos: shared Storage + shape + element strides +
// storage offset, a dtype (float32, float64, int64) and a device (cpu, cuda).
// View ops (view, transpose, permute, narrow, expand, unsqueeze, squeeze) never copy:
// they return a Tensor on the same Storage. No autograd here (see autograd/variable.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/rng.h"
#include "core/shape.h"
#include "core/storage.h"

namespace relpos {

class Tensor {
 public:
  Tensor() = default;  // undefined tensor
  Tensor(StoragePtr storage, Shape shape, Shape strides, int64_t offset, DType dtype);

  // ---- factories ----
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::CPU);  // uninitialised
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::CPU);
  static Tensor ones(const Shape& shape, DType dtype = DType::F32, Device device = Device::CPU);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F32,
                     Device device = Device::CPU);
  static Tensor scalar(double value, DType dtype = DType::F32, Device device = Device::CPU);  // 0-d
  static Tensor arange(int64_t start, int64_t end, DType dtype = DType::I64);
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  static Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::F32,
                      double mean = 0.0, double std = 1.0);
  static Tensor rand(const Shape& shape, Generator& gen, DType dtype = DType::F32,
                     double lo = 0.0, double hi = 1.0);

  // ---- metadata ----
  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int64_t dim() const { return int64_t(shape_.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return numel_of(shape_); }
  DType dtype() const { return dtype_; }
  Device device() const {
    RELPOS_CHECK(defined(), "device(): tensor is undefined");
    return storage_->device();
  }
  bool is_contiguous() const;
  const StoragePtr& storage() const { return storage_; }
  bool shares_storage(const Tensor& o) const { return storage_ == o.storage_; }
  uint64_t version() const {
    RELPOS_CHECK(defined(), "version(): tensor is undefined");
    return storage_->version();
  }
  void bump_version() const {
    RELPOS_CHECK(defined(), "bump_version(): tensor is undefined");
    storage_->bump_version();
  }

  // Pointer to element 0 (storage base + offset); T must match dtype.
  template <typename T> T* data() const;
  void* raw_data() const;

  // ---- views (no copy) ----
  Tensor view(const Shape& shape) const;     // one dim may be -1; needs compatible strides
  Tensor reshape(const Shape& shape) const;  // view when possible, else a contiguous copy
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor permute(const std::vector<int64_t>& order) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // drops dim
  Tensor expand(const Shape& shape) const;          // broadcast to shape (stride 0)
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;  // only a size-1 dim
  Tensor squeeze() const;             // all size-1 dims

  // ---- copies ----
  Tensor contiguous() const;  // this tensor when already contiguous
  Tensor clone() const;       // always a fresh contiguous copy
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;

  // ---- in-place (bump the version counter) ----
  const Tensor& fill_(double value) const;
  const Tensor& copy_(const Tensor& src) const;  // src broadcast to this shape, dtype converted
  const Tensor& zero_() const { return fill_(0.0); }

  // ---- element access ----
  double item() const;  // numel must be 1
  double at(const std::vector<int64_t>& index) const;
  template <typename T> std::vector<T> to_vector() const;  // row-major, converted to T

  std::string str(int max_per_dim = 6) const;  // "tensor([..], shape=[2, 3], dtype=float32, device=cpu)"

 private:
  StoragePtr storage_;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::F32;
};

// Check two tensors agree on dtype and device; the message names op and both tensors.
void check_same_dtype_device(const Tensor& a, const Tensor& b, const char* op);
void check_defined(const Tensor& t, const char* op, const char* what);
// Human-readable description for error messages: "float32 [2, 3] on cpu".
std::string describe(const Tensor& t);

}  // namespace relpos
