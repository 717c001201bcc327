// CUDA gated linear attention (GLA, RetNet as its constant-gate case), forward and backward, chunk
// and recurrent forms: the device twin of kernels/cpu/gla.h with the same math (log-gates g <= 0,
// initial and final states and their gradients; gradients accumulated, +=). Built from the
// chunk-parallel passes of kernels/cuda/chunk_gla.h, the gates made safe by 16-token sub-chunks (no
// exponential of a positive number is taken). The backward recomputes the chunk states, runs the
// reverse state pass for dS, then dv and dq, dk per chunk, and the gate gradient
// dg_t = Σ_{u >= t} (q_u dq_u − k_u dk_u) + rowsum(dht ⊙ S_T) (derivations.md) from in-chunk sums and a
// pass over the chunks' totals. Both forms run the same chunks (the recurrent form differs from the
// chunk form only by rounding). float32; pointers are device memory; kernels run on
// linattn::cuda::compute_stream(). The chunk form's `saved` buffer is not used.
// Without LINATTN_CUDA the same functions exist and throw (kernels/cuda/no_cuda.h).
#pragma once

#include "kernels/cuda/chunk_gla.h"
#include "kernels/cuda/no_cuda.h"

namespace linattn::cuda {

#ifdef LINATTN_CUDA
// writes o, ht (when not null) from q, k, v, g, h0
void gla_forward(const chunk::Mixer<float>& m);
// dq, dk, dv, dg, dh0 += from q, k, v, g, h0, dO, dht
void gla_backward(const chunk::Mixer<float>& m);
#else
inline void gla_forward(const chunk::Mixer<float>&) { LINATTN_NO_CUDA(); }
inline void gla_backward(const chunk::Mixer<float>&) { LINATTN_NO_CUDA(); }
#endif

}  // namespace linattn::cuda
