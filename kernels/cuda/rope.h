// CUDA rotary position embedding (float32) with the argument order and semantics of
// kernels/cpu/rope.h (rotate-half pairs (i, i + d/2), angle (t + pos_offset) theta^(-2i/d), the
// angles and their cos/sin in float64 then rounded, as the CPU does). Pointers are device memory.
#pragma once

#include <cstdint>

#include "kernels/op_types.h"
#include "kernels/cuda/no_cuda.h"

namespace linattn::cuda {

#ifdef LINATTN_CUDA
// y: [B, T, H, d] (overwritten; y == x is allowed)   x: [B, T, H, d]
void rope_forward(float* y, const float* x, int64_t B, int64_t T_, int64_t H, int64_t d, int64_t pos_offset,
                  double theta = kRopeTheta, Sequences seqs = {});
// forward: y = R(a) x  =>  dx += R(-a) dy.  dx: [B, T, H, d] (+=)   dy: [B, T, H, d] (must not alias dx)
void rope_backward(float* dx, const float* dy, int64_t B, int64_t T_, int64_t H, int64_t d, int64_t pos_offset,
                   double theta = kRopeTheta, Sequences seqs = {});
#else
inline void rope_forward(float*, const float*, int64_t, int64_t, int64_t, int64_t, int64_t, double = kRopeTheta,
                         Sequences = {}) {
  LINATTN_NO_CUDA();
}
inline void rope_backward(float*, const float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                          double = kRopeTheta, Sequences = {}) {
  LINATTN_NO_CUDA();
}
#endif

}  // namespace linattn::cuda
