// CUDA bias of a linear layer (float32), and the bias with an activation after it, with the
// semantics of the CPU entries bias_forward, bias_backward, bias_activation_forward and
// bias_activation_backward (kernels/backend.def). Pointers are device memory; y, z, dy, dz are
// [N, out] row-major. Deterministic: the bias gradient is a column sum without atomics
// (kernels/cuda/column_sums.cuh), the same sums in the same order with or without the activation.
#pragma once

#include <cstdint>

#include "kernels/cuda/floats.h"
#include "kernels/cuda/no_cuda.h"
#include "kernels/op_types.h"

namespace linattn::cuda {

#ifdef LINATTN_CUDA
// y [N, out] += bias [out] on every row
void bias_forward(float* y, const float* bias, int64_t N, int64_t out);
// forward: y += bias  =>  dbias [out] += sum over the N rows of dy [N, out]
void bias_backward(float* dbias, const float* dy, int64_t N, int64_t out);
// One pass: y = c f(z + bias) and z16 = the bf16 bits of z + bias, or with z16 null z += bias.
void bias_activation_forward(Activation f, float* y, uint16_t* z16, float* z, const float* bias, int64_t N,
                             int64_t out, float c);
// One pass: dz = (c dy) f'(z) written (float32 or bf16), dbias [out] += its column sums in float32.
void bias_activation_backward(Activation f, FloatsOut dz, float* dbias, Floats z, const float* dy, int64_t N,
                              int64_t out, float c);
#else
inline void bias_forward(float*, const float*, int64_t, int64_t) { LINATTN_NO_CUDA(); }
inline void bias_backward(float*, const float*, int64_t, int64_t) { LINATTN_NO_CUDA(); }
inline void bias_activation_forward(Activation, float*, uint16_t*, float*, const float*, int64_t, int64_t, float) {
  LINATTN_NO_CUDA();
}
inline void bias_activation_backward(Activation, FloatsOut, float*, Floats, const float*, int64_t, int64_t, float) {
  LINATTN_NO_CUDA();
}
#endif

}  // namespace linattn::cuda
