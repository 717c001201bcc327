// CUDA bias of a linear layer (float32), with the semantics of the CPU entries bias_forward and
// bias_backward (kernels/backend.h). Pointers are device memory; y, dy are [N, out] row-major.
// Deterministic: the bias gradient is a column sum without atomics (kernels/cuda/column_sums.cuh).
#pragma once

#include <cstdint>

#include "kernels/cuda/no_cuda.h"

namespace linattn::cuda {

#ifdef LINATTN_CUDA
// y [N, out] += bias [out] on every row
void bias_forward(float* y, const float* bias, int64_t N, int64_t out);
// forward: y += bias  =>  dbias [out] += sum over the N rows of dy [N, out]
void bias_backward(float* dbias, const float* dy, int64_t N, int64_t out);
#else
inline void bias_forward(float*, const float*, int64_t, int64_t) { LINATTN_NO_CUDA(); }
inline void bias_backward(float*, const float*, int64_t, int64_t) { LINATTN_NO_CUDA(); }
#endif

}  // namespace linattn::cuda
