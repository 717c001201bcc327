// Row normalizations over the last dim: RMSNorm (also after a residual add, and swish-gated) and L2
// normalization. x is [N, D] row-major. What a backward reads of the forward (X, Y) is T or (T float)
// a bf16 copy a tape node keeps (stored.h).
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
// The residual sum and its norm in one pass (ops::add_rmsnorm): s = a + b, then y = rmsnorm(s) as
// above (one group per row). s, y: [N, D]; y16, s16: bf16 copies of y and s, or null; rstd: [N];
// a, b: [N, D]; w: [D]
template <class T>
void add_rmsnorm_forward(T* s, T* y, bfloat16* y16, bfloat16* s16, T* rstd, const T* a, const T* b, const T* w,
                         int64_t N, int64_t D, T eps);
// dx = prior + the norm's part: prior is dx itself (+=), null (=: the first writer) or another
// gradient (out of place: the residual stream's gradient passed on, read but not written).
// dx, prior: [N, D]; dx16: dx's bf16 copy (dx rounded), or null; dw: [D] (+=, may be null); dy: [N, D]
template <class T, class X = T>
void rmsnorm_backward(T* dx, bfloat16* dx16, T* dw, const X* x, const T* w, const T* rstd, const T* dy,
                      const T* prior, int64_t N, int64_t D, int64_t G = 1);

// The swish-gated RMSNorm of a mixer's output (fla's FusedRMSNormSwishGate), h = silu(gate) *
// rmsnorm(x) per row, in one pass: what GLA's and Gated DeltaNet's output projections multiply.
// h: [R, D] (Y: T, or bf16: a product's operand), or null (rstd only); x16: x's bf16 copy (what the
// node keeps; X float only) or null; rstd: [R], written, or with rstd_given read (the backward's
// recomputation of h from kept copies); x, gate: [R, D] (X: T, or bf16 kept copies); w: [D]
template <class Y, class X, class T>
void rmsnorm_gate_forward(Y* h, bfloat16* x16, T* rstd, const X* x, const X* gate, const T* w, int64_t R, int64_t D,
                          T eps, bool rstd_given);
// Its backward from dh: dx, dgate: [R, D] (+=, or = with write); dw: [D] (+=, may be null)
template <class T, class X>
void rmsnorm_gate_backward(T* dx, T* dgate, T* dw, const X* x, const X* gate, const T* w, const T* rstd, const T* dh,
                           int64_t R, int64_t D, bool write);

// y = x * r, r = (sum(x^2) + eps)^-1/2 per row (fla's l2norm; the sums run in float32 or better).
// y: [N, D]; r (saved): [N]; x: [N, D]
template <class T> void l2norm_forward(T* y, T* r, const T* x, int64_t N, int64_t D, T eps);
// dx: [N, D] (+=); y: the forward output; dy: [N, D]
template <class T, class Y = T>
void l2norm_backward(T* dx, const Y* y, const T* r, const T* dy, int64_t N, int64_t D);

}  // namespace linattn::cpu
