// nn/init.h — parameter initialisers (write into a tensor from a seeded Generator).
#pragma once
#include "core/rng.h"
#include "core/tensor.h"

namespace relpos::nn::init {

Tensor normal(const Shape& shape, double std, Generator& gen, DType dtype = DType::F32);
Tensor uniform(const Shape& shape, double bound, Generator& gen, DType dtype = DType::F32);  // U(-b, b)
// Xavier/Glorot uniform for a [fan_out, fan_in] weight: bound = sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform(const Shape& shape, Generator& gen, DType dtype = DType::F32);
Tensor zeros(const Shape& shape, DType dtype = DType::F32);
Tensor ones(const Shape& shape, DType dtype = DType::F32);

}  // namespace relpos::nn::init
