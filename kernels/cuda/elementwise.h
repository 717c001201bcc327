// CUDA pointwise kernels (float32): add, mul, scale, activations and SwiGLU, forward and backward,
// with the argument order and semantics of kernels/cpu/elementwise.h. Pointers are device memory,
// all arrays n contiguous elements; backward kernels accumulate (+=) into their gradients. What a
// backward reads of the forward's input (Floats, floats.h) may be kept in bf16, and SwiGLU's forward
// may write a product's bf16 operand.
// Without LINATTN_CUDA the same functions exist and throw (kernels/cuda/no_cuda.h).
#pragma once

#include <cstdint>

#include "kernels/cuda/floats.h"
#include "kernels/cuda/no_cuda.h"
#include "kernels/op_types.h"

namespace linattn::cuda {

#ifdef LINATTN_CUDA
// y = a + b
void add_forward(float* y, const float* a, const float* b, int64_t n);
// y += x
void add_inplace(float* y, const float* x, int64_t n);
// forward: y = a * b  =>  da += dy * b, db += dy * a (da or db may be null)
void mul_forward(float* y, const float* a, const float* b, int64_t n);
void mul_backward(float* da, float* db, const float* a, const float* b, const float* dy, int64_t n);
// y = c x
void scale_forward(float* y, const float* x, float c, int64_t n);
// y += c x
void axpy(float* y, float c, const float* x, int64_t n);
// y = c f(x); backward: dx += c f'(x) dy (computed from x); write: dx = c f'(x) dy, the first writer
// of dx (SwiGLU's backward alike)
void activation_forward(Activation f, float* y, const float* x, int64_t n, float c = 1);
void activation_backward(Activation f, float* dx, Floats x, const float* dy, int64_t n, float c = 1,
                         bool write = false);
// forward: y = silu(g) u  =>  dg += dy u silu'(g), du += dy silu(g)
void swiglu_forward(FloatsOut y, Floats gate, Floats up, int64_t n);
void swiglu_backward(float* dgate, float* dup, Floats gate, Floats up, const float* dy, int64_t n, bool write = false);
// The same over x [rows, 2 cols] = [gate | up] (kernels/backend.def's swiglu_joined): y [rows, cols],
// and x's bf16 copy when copy is not null; the backward writes dx [rows, 2 cols] = [dgate | dup].
void swiglu_joined_forward(FloatsOut y, uint16_t* copy, Floats x, int64_t rows, int64_t cols);
void swiglu_joined_backward(FloatsOut dx, Floats x, const float* dy, int64_t rows, int64_t cols);
#else
inline void add_forward(float*, const float*, const float*, int64_t) { LINATTN_NO_CUDA(); }
inline void add_inplace(float*, const float*, int64_t) { LINATTN_NO_CUDA(); }
inline void mul_forward(float*, const float*, const float*, int64_t) { LINATTN_NO_CUDA(); }
inline void mul_backward(float*, float*, const float*, const float*, const float*, int64_t) { LINATTN_NO_CUDA(); }
inline void scale_forward(float*, const float*, float, int64_t) { LINATTN_NO_CUDA(); }
inline void axpy(float*, float, const float*, int64_t) { LINATTN_NO_CUDA(); }
inline void activation_forward(Activation, float*, const float*, int64_t, float = 1) { LINATTN_NO_CUDA(); }
inline void activation_backward(Activation, float*, Floats, const float*, int64_t, float = 1, bool = false) {
  LINATTN_NO_CUDA();
}
inline void swiglu_forward(FloatsOut, Floats, Floats, int64_t) { LINATTN_NO_CUDA(); }
inline void swiglu_backward(float*, float*, Floats, Floats, const float*, int64_t, bool = false) { LINATTN_NO_CUDA(); }
inline void swiglu_joined_forward(FloatsOut, uint16_t*, Floats, int64_t, int64_t) { LINATTN_NO_CUDA(); }
inline void swiglu_joined_backward(FloatsOut, Floats, const float*, int64_t, int64_t) { LINATTN_NO_CUDA(); }
#endif

}  // namespace linattn::cuda
