// CUDA pointwise kernels (float32). Pointers are device memory; kernels launch on the compute
// stream. Compiled with the CUDA backend only; ops reach them through the backend table.
#pragma once

#include <cstdint>

namespace linattn::cuda {

// y = a + b over n elements
void add_forward(float* y, const float* a, const float* b, int64_t n);
// y += x over n elements
void add_inplace(float* y, const float* x, int64_t n);

}  // namespace linattn::cuda
