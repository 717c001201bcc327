// CUDA bias of a linear layer (float32), as kernels/backend.h's bias_forward / bias_backward:
// y [N, out] += bias [out] on every row; dbias [out] += the sum of the rows of dy [N, out]. The
// backward gives each column one thread that adds the rows in order: no atomics, the same bits on
// every run. Pointers are device memory; kernels run on linattn::cuda::compute_stream().
// Without LINATTN_CUDA the same functions exist and throw (kernels/cuda/no_cuda.h).
#pragma once

#include <cstdint>

#include "kernels/cuda/no_cuda.h"

namespace linattn::cuda {

#ifdef LINATTN_CUDA
void bias_forward(float* y, const float* bias, int64_t N, int64_t out);
void bias_backward(float* dbias, const float* dy, int64_t N, int64_t out);
#else
inline void bias_forward(float*, const float*, int64_t, int64_t) { LINATTN_NO_CUDA(); }
inline void bias_backward(float*, const float*, int64_t, int64_t) { LINATTN_NO_CUDA(); }
#endif

}  // namespace linattn::cuda
