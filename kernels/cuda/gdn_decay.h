// CUDA Gated DeltaNet log-decay (float32), with the argument order and semantics of
// kernels/cpu/elementwise.h: a[r, h] = -exp(A_log[h]) * softplus(x[r, h] + dt_bias[h]).
// x, a: [rows, H]; A_log, dt_bias: [H]; pointers are device memory; gradients accumulate (+=).
// Deterministic: the parameter gradients are column sums without atomics (column_sums.cuh).
#pragma once

#include <cstdint>

#include "kernels/cuda/no_cuda.h"

namespace linattn::cuda {

#ifdef LINATTN_CUDA
void gdn_decay_forward(float* a, const float* x, const float* A_log, const float* dt_bias, int64_t rows, int64_t H);
// forward: a = -e sp(s), s = x + dt_bias, e = exp(A_log)
//   =>  dx += da (-e sigmoid(s)), ddt_bias[h] += sum_r da (-e sigmoid(s)), dA_log[h] += sum_r da a
// dx, dA_log, ddt_bias may each be null.
void gdn_decay_backward(float* dx, float* dA_log, float* ddt_bias, const float* x, const float* A_log,
                        const float* dt_bias, const float* da, int64_t rows, int64_t H);
#else
inline void gdn_decay_forward(float*, const float*, const float*, const float*, int64_t, int64_t) {
  LINATTN_NO_CUDA();
}
inline void gdn_decay_backward(float*, float*, float*, const float*, const float*, const float*, const float*, int64_t,
                               int64_t) {
  LINATTN_NO_CUDA();
}
#endif

}  // namespace linattn::cuda
