// Rotary position embedding (RoPE, Su et al. 2021) on q or k of a softmax-attention layer, in the
// rotate-half convention of HF/fla: in each head of d channels (d even), channel i and channel
// i + d/2 (i < d/2) form a pair rotated by the angle a = (t + pos_offset) * theta^(-2i/d):
//   y_i       = x_i cos a - x_{i+d/2} sin a
//   y_{i+d/2} = x_{i+d/2} cos a + x_i sin a
// so that q_m . k_n after the rotation depends on the positions only through m - n.
// pos_offset is the absolute position of row t = 0 (the number of tokens already decoded). With
// `seqs` (kernels/op_types.h) t counts from the start of its sequence, and pos_offset applies to the
// sequences that start a row only: the others start at position 0.
#pragma once

#include <cstdint>

#include "kernels/op_types.h"

namespace linattn::cpu {

// y: [B, T, H, d] (overwritten; y == x is allowed)   x: [B, T, H, d]
template <class T>
void rope_forward(T* y, const T* x, int64_t B, int64_t T_, int64_t H, int64_t d, int64_t pos_offset,
                  double theta = kRopeTheta, Sequences seqs = {});

// The rotation is orthogonal, so its backward is the rotation by -a:
// dx: [B, T, H, d] ACCUMULATED (+=)   dy: [B, T, H, d] (must not alias dx)
template <class T>
void rope_backward(T* dx, const T* dy, int64_t B, int64_t T_, int64_t H, int64_t d, int64_t pos_offset,
                   double theta = kRopeTheta, Sequences seqs = {});

}  // namespace linattn::cpu
