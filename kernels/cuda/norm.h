// CUDA row normalizations over the last dim (float32, statistics in float32): RMSNorm (also after a
// residual add, and swish-gated) and L2 normalization, with the argument order and semantics of
// kernels/cpu/norm.h. x is [N, D] row-major; pointers are device memory; gradients accumulate (+=;
// rmsnorm's dx: prior +). Deterministic: no atomics. What a backward reads of the forward (x, or
// l2norm's y, the gate: Floats, floats.h) may be kept in bf16.
#pragma once

#include <cstdint>

#include "kernels/cuda/floats.h"
#include "kernels/cuda/no_cuda.h"

namespace linattn::cuda {

#ifdef LINATTN_CUDA
// y = x * rstd * w, rstd = (mean(x^2) + eps)^-1/2 over each of a row's G groups of D/G consecutive
// values (G = 1: the whole row).
// y: [N, D]; y16, x16: [N, D] bf16 copies (bits) of y and x, or null; rstd (saved): [N, G]; x: [N, D]; w: [D]
void rmsnorm_forward(float* y, uint16_t* y16, uint16_t* x16, float* rstd, const float* x, const float* w, int64_t N,
                     int64_t D, float eps, int64_t G = 1);
// The residual sum and its norm in one pass: s = a + b, y = rmsnorm(s) (one group per row).
// s, y: [N, D]; y16, s16: bf16 copies (bits) of y and s, or null; rstd: [N]; a, b: [N, D]; w: [D]
void add_rmsnorm_forward(float* s, float* y, uint16_t* y16, uint16_t* s16, float* rstd, const float* a,
                         const float* b, const float* w, int64_t N, int64_t D, float eps);
// dx = prior + the norm's part: prior is dx itself (+=), null (=) or another gradient (out of place).
// dx, prior: [N, D]; dw: [D] (+=, may be null); dy: [N, D]; dx16: dx's bf16 copy (bits), or null
void rmsnorm_backward(float* dx, float* dw, Floats x, const float* w, const float* rstd, const float* dy,
                      const float* prior, int64_t N, int64_t D, int64_t G = 1, uint16_t* dx16 = nullptr);
// h = silu(gate) * rmsnorm(x) per row (fla's FusedRMSNormSwishGate). h: [R, D] float32 or bf16, or null
// (rstd only); x16: x's bf16 copy (bits) or null; rstd: [R], written, or read with rstd_given; x, gate:
// [R, D] (kept copies alike); w: [D]
void rmsnorm_gate_forward(FloatsOut h, uint16_t* x16, float* rstd, Floats x, Floats gate, const float* w, int64_t R,
                          int64_t D, float eps, bool rstd_given);
// Its backward from dh [R, D]: dx, dgate (+=, or = with write); dw: [D] (+=, may be null)
void rmsnorm_gate_backward(float* dx, float* dgate, float* dw, Floats x, Floats gate, const float* w,
                           const float* rstd, const float* dh, int64_t R, int64_t D, bool write);
// y = x * r, r = (sum(x^2) + eps)^-1/2 per row.  y: [N, D]; r (saved): [N]; x: [N, D]
void l2norm_forward(float* y, float* r, const float* x, int64_t N, int64_t D, float eps);
// dx: [N, D] (+=); y: the forward output; dy: [N, D]
void l2norm_backward(float* dx, Floats y, const float* r, const float* dy, int64_t N, int64_t D);
#else
inline void rmsnorm_forward(float*, uint16_t*, uint16_t*, float*, const float*, const float*, int64_t, int64_t, float,
                            int64_t = 1) {
  LINATTN_NO_CUDA();
}
inline void add_rmsnorm_forward(float*, float*, uint16_t*, uint16_t*, float*, const float*, const float*,
                                const float*, int64_t, int64_t, float) {
  LINATTN_NO_CUDA();
}
inline void rmsnorm_backward(float*, float*, Floats, const float*, const float*, const float*, const float*, int64_t,
                             int64_t, int64_t = 1, uint16_t* = nullptr) {
  LINATTN_NO_CUDA();
}
inline void rmsnorm_gate_forward(FloatsOut, uint16_t*, float*, Floats, Floats, const float*, int64_t, int64_t, float,
                                 bool) {
  LINATTN_NO_CUDA();
}
inline void rmsnorm_gate_backward(float*, float*, float*, Floats, Floats, const float*, const float*, const float*,
                                  int64_t, int64_t, bool) {
  LINATTN_NO_CUDA();
}
inline void l2norm_forward(float*, float*, const float*, int64_t, int64_t, float) { LINATTN_NO_CUDA(); }
inline void l2norm_backward(float*, Floats, const float*, const float*, int64_t, int64_t) { LINATTN_NO_CUDA(); }
#endif

}  // namespace linattn::cuda
