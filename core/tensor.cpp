#include "core/tensor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/cuda_runtime.h"
#include "core/strided.h"

namespace relpos {

Tensor::Tensor(StoragePtr storage, Shape shape, Shape strides, int64_t offset, DType dtype)
    : storage_(std::move(storage)),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset),
      dtype_(dtype) {}

// ---------------------------------------------------------------- factories

static Tensor allocate(const Shape& shape, DType dtype, Device device, bool zero) {
  for (int64_t d : shape) RELPOS_CHECK(d >= 0, "negative dimension in shape {}", shape_str(shape));
  auto st = std::make_shared<Storage>(size_t(numel_of(shape)) * dtype_size(dtype), device, zero);
  return Tensor(std::move(st), shape, contiguous_strides(shape), 0, dtype);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) { return allocate(shape, dtype, device, false); }

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) { return allocate(shape, dtype, device, true); }

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype, Device device) { return full({}, value, dtype, device); }

Tensor Tensor::arange(int64_t start, int64_t end, DType dtype) {
  Tensor t = empty({std::max<int64_t>(end - start, 0)}, dtype);
  visit_all(dtype, [&]<typename T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = T(start + i);
  });
  return t;
}

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  RELPOS_CHECK(int64_t(values.size()) == numel_of(shape),
               "from_vector: {} values do not fill shape {} ({} elements)", values.size(),
               shape_str(shape), numel_of(shape));
  Tensor t = empty(shape, dtype_of<T>());
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}
template Tensor Tensor::from_vector(const std::vector<float>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<double>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<int64_t>&, const Shape&);

Tensor Tensor::randn(const Shape& shape, Generator& gen, DType dtype, double mean, double std) {
  Tensor t = empty(shape, dtype);
  visit_float(dtype, "randn", [&]<typename T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = T(mean + std * gen.normal());
  });
  return t;
}

Tensor Tensor::rand(const Shape& shape, Generator& gen, DType dtype, double lo, double hi) {
  Tensor t = empty(shape, dtype);
  visit_float(dtype, "rand", [&]<typename T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = T(lo + (hi - lo) * gen.uniform());
  });
  return t;
}

// ---------------------------------------------------------------- metadata

int64_t Tensor::size(int64_t d) const { return shape_[wrap_existing_dim(d, dim(), "size")]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

template <typename T>
T* Tensor::data() const {
  RELPOS_CHECK(defined(), "data(): tensor is undefined");
  RELPOS_CHECK(dtype_of<T>() == dtype_, "data<{}>(): tensor has dtype {}", dtype_name(dtype_of<T>()),
               dtype_name(dtype_));
  return static_cast<T*>(storage_->data()) + offset_;
}
template float* Tensor::data<float>() const;
template double* Tensor::data<double>() const;
template int64_t* Tensor::data<int64_t>() const;

void* Tensor::raw_data() const {
  return static_cast<char*>(storage_->data()) + offset_ * int64_t(dtype_size(dtype_));
}

// ---------------------------------------------------------------- views

static Shape infer_shape(const Shape& shape, int64_t numel, const char* op, const Shape& from) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      RELPOS_CHECK(infer < 0, "{}: only one dimension can be -1 in {}", op, shape_str(shape));
      infer = int64_t(i);
    } else {
      RELPOS_CHECK(out[i] >= 0, "{}: invalid size {} in {}", op, out[i], shape_str(shape));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    RELPOS_CHECK(known != 0 && numel % known == 0, "{}: cannot reshape {} into {}", op,
                 shape_str(from), shape_str(shape));
    out[infer] = numel / known;
  }
  RELPOS_CHECK(numel_of(out) == numel, "{}: cannot reshape {} ({} elements) into {} ({} elements)",
               op, shape_str(from), numel, shape_str(out), numel_of(out));
  return out;
}

// Strides for viewing (shape, strides) as `target` without a copy; false if impossible.
// Walk source dims from the back, grouping them into chunks that are contiguous with
// respect to each other; each chunk must be covered exactly by a run of target dims.
static bool view_strides(const Shape& shape, const Shape& strides, const Shape& target,
                         Shape& out) {
  out.assign(target.size(), 1);
  if (numel_of(shape) == 0 || shape.empty()) {
    out = contiguous_strides(target);
    return true;
  }
  int64_t td = int64_t(target.size()) - 1;
  int64_t base = strides.back();  // stride of the innermost dim of the current chunk
  int64_t chunk_numel = 1, covered = 1;
  for (int64_t sd = int64_t(shape.size()) - 1; sd >= 0; --sd) {
    chunk_numel *= shape[sd];
    bool chunk_ends = sd == 0 || (shape[sd - 1] != 1 && strides[sd - 1] != chunk_numel * base);
    if (!chunk_ends) continue;
    while (td >= 0 && (covered < chunk_numel || target[td] == 1)) {
      out[td] = covered * base;
      covered *= target[td];
      --td;
    }
    if (covered != chunk_numel) return false;
    if (sd > 0) {
      base = strides[sd - 1];
      chunk_numel = 1;
      covered = 1;
    }
  }
  return td == -1;
}

Tensor Tensor::view(const Shape& shape) const {
  Shape target = infer_shape(shape, numel(), "view", shape_);
  Shape st;
  RELPOS_CHECK(view_strides(shape_, strides_, target, st),
               "view: cannot view a non-contiguous tensor of shape {} (strides {}) as {}; "
               "use reshape()",
               shape_str(shape_), shape_str(strides_), shape_str(target));
  return Tensor(storage_, target, st, offset_, dtype_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape target = infer_shape(shape, numel(), "reshape", shape_);
  Shape st;
  if (view_strides(shape_, strides_, target, st)) return Tensor(storage_, target, st, offset_, dtype_);
  return contiguous().view(target);
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  a = wrap_existing_dim(a, dim(), "transpose");
  b = wrap_existing_dim(b, dim(), "transpose");
  Tensor t = *this;
  std::swap(t.shape_[a], t.shape_[b]);
  std::swap(t.strides_[a], t.strides_[b]);
  return t;
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  RELPOS_CHECK(int64_t(order.size()) == dim(), "permute: order has {} entries for a {}-d tensor {}",
               order.size(), dim(), shape_str(shape_));
  std::vector<bool> seen(order.size(), false);
  Tensor t = *this;
  for (size_t i = 0; i < order.size(); ++i) {
    int64_t d = wrap_dim(order[i], dim(), "permute");
    RELPOS_CHECK(!seen[d], "permute: dim {} repeated in order", d);
    seen[d] = true;
    t.shape_[i] = shape_[d];
    t.strides_[i] = strides_[d];
  }
  return t;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = wrap_existing_dim(d, dim(), "narrow");
  RELPOS_CHECK(start >= 0 && length >= 0 && start + length <= shape_[d],
               "narrow: range [{}, {}) out of bounds for dim {} of size {} (shape {})", start,
               start + length, d, shape_[d], shape_str(shape_));
  Tensor t = *this;
  t.shape_[d] = length;
  t.offset_ += start * strides_[d];
  return t;
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_existing_dim(d, dim(), "slice");
  RELPOS_CHECK(step > 0, "slice: step must be positive, got {}", step);
  int64_t n = shape_[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Tensor t = *this;
  t.shape_[d] = (end - start + step - 1) / step;
  t.strides_[d] = strides_[d] * step;
  t.offset_ += start * strides_[d];
  return t;
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_existing_dim(d, dim(), "select");
  if (index < 0) index += shape_[d];
  RELPOS_CHECK(index >= 0 && index < shape_[d], "select: index {} out of range for dim {} of size {}",
               index, d, shape_[d]);
  Tensor t = *this;
  t.offset_ += index * strides_[d];
  t.shape_.erase(t.shape_.begin() + d);
  t.strides_.erase(t.strides_.begin() + d);
  return t;
}

Tensor Tensor::expand(const Shape& shape) const {
  RELPOS_CHECK(shape.size() >= shape_.size(), "expand: cannot expand {} to fewer dims {}",
               shape_str(shape_), shape_str(shape));
  size_t lead = shape.size() - shape_.size();
  Shape st(shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) continue;
    int64_t src = shape_[i - lead];
    RELPOS_CHECK(src == shape[i] || src == 1, "expand: cannot expand {} to {} (dim {}: {} vs {})",
                 shape_str(shape_), shape_str(shape), i, src, shape[i]);
    st[i] = src == shape[i] ? strides_[i - lead] : 0;
  }
  return Tensor(storage_, shape, st, offset_, dtype_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Tensor t = *this;
  int64_t st = d < dim() ? strides_[d] * shape_[d] : 1;
  t.shape_.insert(t.shape_.begin() + d, 1);
  t.strides_.insert(t.strides_.begin() + d, st);
  return t;
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_existing_dim(d, dim(), "squeeze");
  RELPOS_CHECK(shape_[d] == 1, "squeeze: dim {} has size {} (shape {}), expected 1", d, shape_[d],
               shape_str(shape_));
  Tensor t = *this;
  t.shape_.erase(t.shape_.begin() + d);
  t.strides_.erase(t.strides_.begin() + d);
  return t;
}

Tensor Tensor::squeeze() const {
  Tensor t = *this;
  for (int64_t d = dim() - 1; d >= 0; --d)
    if (shape_[d] == 1) t = t.squeeze(d);
  return t;
}

// ---------------------------------------------------------------- copies

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape_, dtype_, device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType dt) const {
  if (dt == dtype_) return *this;
  Tensor out = empty(shape_, dt, device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device dev) const {
  if (dev == device()) return *this;
  Tensor src = contiguous();
  Tensor out = empty(shape_, dtype_, dev);
  size_t n = size_t(numel()) * dtype_size(dtype_);
  if (dev == Device::CUDA)
    cuda::copy_to_device(out.raw_data(), src.raw_data(), n);
  else
    cuda::copy_to_host(out.raw_data(), src.raw_data(), n);
  return out;
}

// The device-side form of a view, for core/cuda_runtime's strided copy and fill.
static cuda::StridedView strided_view(const Tensor& t, const char* op) {
  RELPOS_CHECK(t.dim() <= cuda::kMaxDims, "{}: cuda tensors of rank > {} are not supported ({})", op, cuda::kMaxDims,
               describe(t));
  cuda::StridedView v{t.raw_data(), t.dtype(), int(t.dim()), {}, {}};
  for (int64_t d = 0; d < t.dim(); ++d) v.shape[d] = t.shape()[d], v.strides[d] = t.strides()[d];
  return v;
}

const Tensor& Tensor::fill_(double value) const {
  if (device() == Device::CUDA) {
    cuda::strided_fill(strided_view(*this, "fill_"), value);
    bump_version();
    return *this;
  }
  visit_all(dtype_, [&]<typename T>() {
    T v = T(value);
    T* base = static_cast<T*>(storage_->data());
    for_each_run<1>(shape_, {strides_}, [&](auto off, int64_t n, auto st) {
      T* p = base + offset_ + off[0];
      for (int64_t i = 0; i < n; ++i) p[i * st[0]] = v;
    });
  });
  bump_version();
  return *this;
}

const Tensor& Tensor::copy_(const Tensor& src) const {
  check_defined(src, "copy_", "source");
  Tensor s = src.expand(broadcast_shapes(src.shape_, shape_, "copy_"));
  RELPOS_CHECK(s.shape_ == shape_, "copy_: source {} does not broadcast to destination {}",
               shape_str(src.shape_), shape_str(shape_));
  if (src.device() != device()) s = src.to(device()).expand(shape_);  // one transfer, then a local copy
  if (device() == Device::CUDA) {
    cuda::strided_copy(strided_view(*this, "copy_"), strided_view(s, "copy_"));
    bump_version();
    return *this;
  }
  visit_all(dtype_, [&]<typename D>() {
    visit_all(s.dtype_, [&]<typename S>() {
      D* dst = static_cast<D*>(storage_->data()) + offset_;
      const S* sp = static_cast<const S*>(s.storage_->data()) + s.offset_;
      for_each_run<2>(shape_, {strides_, s.strides_}, [&](auto off, int64_t n, auto st) {
        D* d = dst + off[0];
        const S* p = sp + off[1];
        for (int64_t i = 0; i < n; ++i) d[i * st[0]] = D(p[i * st[1]]);
      });
    });
  });
  bump_version();
  return *this;
}

// ---------------------------------------------------------------- element access

double Tensor::item() const {
  RELPOS_CHECK(numel() == 1, "item(): tensor has {} elements (shape {}), expected 1", numel(),
               shape_str(shape_));
  return at(Shape(shape_.size(), 0));
}

double Tensor::at(const std::vector<int64_t>& index) const {
  RELPOS_CHECK(int64_t(index.size()) == dim(), "at(): {} indices for a {}-d tensor", index.size(),
               dim());
  Tensor host = device() == Device::CPU ? *this : to(Device::CPU);
  int64_t off = host.offset_;
  for (size_t i = 0; i < index.size(); ++i) {
    RELPOS_CHECK(index[i] >= 0 && index[i] < shape_[i], "at(): index {} out of range for dim {} of size {}",
                 index[i], i, shape_[i]);
    off += index[i] * host.strides_[i];
  }
  return visit_all(dtype_, [&]<typename T>() {
    return double(static_cast<const T*>(host.storage_->data())[off]);
  });
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = (device() == Device::CPU ? *this : to(Device::CPU)).to(dtype_of<T>()).contiguous();
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}
template std::vector<float> Tensor::to_vector() const;
template std::vector<double> Tensor::to_vector() const;
template std::vector<int64_t> Tensor::to_vector() const;

// ---------------------------------------------------------------- helpers

std::string describe(const Tensor& t) {
  if (!t.defined()) return "undefined tensor";
  return fmt::format("{} {} on {}", dtype_name(t.dtype()), shape_str(t.shape()),
                     device_name(t.device()));
}

void check_defined(const Tensor& t, const char* op, const char* what) {
  RELPOS_CHECK(t.defined(), "{}: {} is an undefined tensor", op, what);
}

void check_same_dtype_device(const Tensor& a, const Tensor& b, const char* op) {
  check_defined(a, op, "first operand");
  check_defined(b, op, "second operand");
  RELPOS_CHECK(a.dtype() == b.dtype(), "{}: dtype mismatch: {} vs {}", op, describe(a), describe(b));
  RELPOS_CHECK(a.device() == b.device(), "{}: device mismatch: {} vs {}", op, describe(a),
               describe(b));
}

}  // namespace relpos
