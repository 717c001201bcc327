// CUDA linear attention, forward and backward, chunk and recurrent forms: the device twin of
// kernels/cpu/linear_attn.h with the same math (every feature map, the normalized form with its z
// states, initial and final states and their gradients; gradients accumulated, +=). Built from the
// chunk-parallel passes of kernels/cuda/chunk_gla.h without gates; the normalized form runs them over
// the value columns [v | 1] (numerator and denominator at once). The backward recomputes the chunk
// states instead of storing them. Both forms run the same chunks (the recurrent form differs from
// the chunk form only by rounding). float32; pointers are device memory; kernels run on
// linattn::cuda::compute_stream(). The chunk form's `saved` buffer, sized by the CPU kernels, is not used.
// Without LINATTN_CUDA the same functions exist and throw (kernels/cuda/no_cuda.h).
#pragma once

#include "kernels/cuda/chunk_gla.h"
#include "kernels/cuda/no_cuda.h"

namespace linattn::cuda {

#ifdef LINATTN_CUDA
// writes o, ht, zt (when not null) from q, k, v, h0, z0
void linear_attention_forward(const chunk::Mixer<float>& m);
// dq, dk, dv, dh0, dz0 += from q, k, v, h0, z0, dO, dht, dzt (and o, the forward's output, when normalized)
void linear_attention_backward(const chunk::Mixer<float>& m);
#else
inline void linear_attention_forward(const chunk::Mixer<float>&) { LINATTN_NO_CUDA(); }
inline void linear_attention_backward(const chunk::Mixer<float>&) { LINATTN_NO_CUDA(); }
#endif

}  // namespace linattn::cuda
