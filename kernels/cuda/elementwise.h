// CUDA pointwise kernels (float32), the first of the device backend. Pointers are device memory.
// Without LINATTN_CUDA the same functions exist and throw, so callers need no #ifdefs (and no
// device tensor can exist in such a build anyway).
#pragma once

#include <cstdint>

#include "core/error.h"

namespace linattn::cuda {

#ifdef LINATTN_CUDA
// y = a + b over n elements
void add_forward(float* y, const float* a, const float* b, int64_t n);
// y += x over n elements
void add_inplace(float* y, const float* x, int64_t n);
#else
inline void add_forward(float*, const float*, const float*, int64_t) {
  LINATTN_FAIL("linattn was built without CUDA (configure with -DLINATTN_CUDA=ON)");
}
inline void add_inplace(float*, const float*, int64_t) {
  LINATTN_FAIL("linattn was built without CUDA (configure with -DLINATTN_CUDA=ON)");
}
#endif

}  // namespace linattn::cuda
