#include "nn/init.h"

#include <cmath>

namespace relpos::nn::init {

Tensor normal(const Shape& shape, double std, Generator& gen, DType dtype) {
  return Tensor::randn(shape, gen, dtype, 0.0, std);
}

Tensor uniform(const Shape& shape, double bound, Generator& gen, DType dtype) {
  return Tensor::rand(shape, gen, dtype, -bound, bound);
}

Tensor xavier_uniform(const Shape& shape, Generator& gen, DType dtype) {
  RELPOS_CHECK(shape.size() == 2, "xavier_uniform: expected a [fan_out, fan_in] shape, got {}", shape_str(shape));
  return uniform(shape, std::sqrt(6.0 / double(shape[0] + shape[1])), gen, dtype);
}

Tensor zeros(const Shape& shape, DType dtype) { return Tensor::zeros(shape, dtype); }
Tensor ones(const Shape& shape, DType dtype) { return Tensor::ones(shape, dtype); }

}  // namespace relpos::nn::init
