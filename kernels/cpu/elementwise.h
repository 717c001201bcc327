// Pointwise kernels: add, mul, activations and SwiGLU, forward and backward side by side.
// All arrays are n contiguous elements. Backward kernels accumulate (+=) into their gradients.
// T is the arithmetic type; X, what a backward reads of the forward's inputs, is T or (T float) a
// bf16 copy a tape node keeps (stored.h). SwiGLU's forward reads X and writes Y, each float, double
// or bf16 (a product's operand), and computes in double or float as they are double or not.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/op_types.h"

namespace linattn::cpu {

// forward: y = a + b  =>  da += dy, db += dy (the caller does the accumulation with add_inplace)
template <class T> void add_forward(T* y, const T* a, const T* b, int64_t n);
// y += x
template <class T> void add_inplace(T* y, const T* x, int64_t n);

// forward: y = a * b  =>  da += dy * b, db += dy * a
template <class T> void mul_forward(T* y, const T* a, const T* b, int64_t n);
template <class T> void mul_backward(T* da, T* db, const T* a, const T* b, const T* dy, int64_t n);

// forward: y = c x  =>  dx += c dy (the backward is scale_forward into a buffer, then add; or axpy)
template <class T> void scale_forward(T* y, const T* x, T c, int64_t n);
// y += c x
template <class T> void axpy(T* y, T c, const T* x, int64_t n);

// y = c f(x) for the activation, c a constant (1, or GLA's gate normalizer); backward: dx += c f'(x)
// dy (computed from x); with `write`, dx = c f'(x) dy (the first writer of dx: its old contents are
// not read). SwiGLU's backward alike.
template <class T> void activation_forward(Activation f, T* y, const T* x, int64_t n, T c = T(1));
template <class T, class X = T>
void activation_backward(Activation f, T* dx, const X* x, const T* dy, int64_t n, T c = T(1), bool write = false);

// SwiGLU: y = silu(gate) * up
// forward: y = silu(g) u  =>  dg += dy u silu'(g), du += dy silu(g)
template <class Y, class X> void swiglu_forward(Y* y, const X* gate, const X* up, int64_t n);
template <class T, class X = T>
void swiglu_backward(T* dgate, T* dup, const X* gate, const X* up, const T* dy, int64_t n, bool write = false);
// SwiGLU over rows that hold gate and up side by side (one product's output, ops::swiglu_mlp):
// x [rows, 2 cols] = [gate | up], y [rows, cols] = silu(gate) * up, and when copy is not null, x's
// bf16 copy [rows, 2 cols] in the same pass. Backward: dx [rows, 2 cols] = [dgate | dup], written.
// X: float, bf16 (a kept copy) or double; Y, D: float, bf16 (a product's operand) or double.
template <class Y, class X> void swiglu_joined_forward(Y* y, bfloat16* copy, const X* x, int64_t rows, int64_t cols);
template <class D, class X, class T>
void swiglu_joined_backward(D* dx, const X* x, const T* dy, int64_t rows, int64_t cols);

// Gated DeltaNet's log-decay in fla's parameterization, per row r (batch and time) and head h:
// a[r, h] = -exp(A_log[h]) * softplus(x[r, h] + dt_bias[h]).  x, a: [rows, H]; A_log, dt_bias: [H].
// forward: a = -e sp(s), s = x + dt_bias, e = exp(A_log)
//   =>  dx += da (-e sigmoid(s)), ddt_bias[h] += sum_r da (-e sigmoid(s)), dA_log[h] += sum_r da a
template <class T> void gdn_decay_forward(T* a, const T* x, const T* A_log, const T* dt_bias, int64_t rows, int64_t H);
template <class T>
void gdn_decay_backward(T* dx, T* dA_log, T* ddt_bias, const T* x, const T* A_log, const T* dt_bias, const T* da,
                        int64_t rows, int64_t H);

}  // namespace linattn::cpu
