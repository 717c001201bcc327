// Row normalizations over the last dim: RMSNorm and L2 normalization. x is [N, D] row-major. What a
// backward reads of the forward (X, Y) is T or (T float) a bf16 copy a tape node keeps (stored.h).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace linattn::cpu {

// y = x * rstd * w, rstd = (mean(x^2) + eps)^-1/2 over each of a row's G groups of D/G consecutive
// values (G = 1: the whole row; Mamba2's gated norm normalizes each group of heads on its own).
// y: [N, D]; y16, x16: [N, D] bf16 copies of y and x, or null; rstd (saved): [N, G]; x: [N, D]; w: [D]
template <class T>
void rmsnorm_forward(T* y, bfloat16* y16, bfloat16* x16, T* rstd, const T* x, const T* w, int64_t N, int64_t D,
                     T eps, int64_t G = 1);
// dx: [N, D] (+=); dw: [D] (+=, may be null); dy: [N, D]
template <class T, class X = T>
void rmsnorm_backward(T* dx, T* dw, const X* x, const T* w, const T* rstd, const T* dy, int64_t N, int64_t D,
                      int64_t G = 1);

// y = x * r, r = (sum(x^2) + eps)^-1/2 per row (fla's l2norm; the sums run in float32 or better).
// y: [N, D]; r (saved): [N]; x: [N, D]
template <class T> void l2norm_forward(T* y, T* r, const T* x, int64_t N, int64_t D, T eps);
// dx: [N, D] (+=); y: the forward output; dy: [N, D]
template <class T, class Y = T>
void l2norm_backward(T* dx, const Y* y, const T* r, const T* dy, int64_t N, int64_t D);

}  // namespace linattn::cpu
