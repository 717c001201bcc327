// CUDA gated linear attention (GLA, RetNet as its constant-gate case), forward and backward, chunk
// and recurrent forms: the device twin of kernels/cpu/gla.h with the same math (log-gates g <= 0,
// initial and final states and their gradients; gradients accumulated, +=). Built from the scans of
// kernels/cuda/linear_scan.h, the gates kept in log space as pairwise differences of cumulative sums
// inside a chunk (no exponential of a positive number is ever taken). The backward recomputes the
// states: a forward scan for dq (and the final state), reversed ones for dk and for dv, dh0, then the
// gate gradient dg_t = Σ_{u >= t} (q_u dq_u − k_u dk_u) + rowsum(dht ⊙ S_T) (derivations.md). The
// recurrent form (m.chunk = 1) is the same scan one token at a time. float32; pointers are device
// memory; kernels run on linattn::cuda::compute_stream(). The chunk form's `saved` buffer is not used.
// Without LINATTN_CUDA the same functions exist and throw (kernels/cuda/no_cuda.h).
#pragma once

#include "kernels/cuda/linear_scan.h"
#include "kernels/cuda/no_cuda.h"

namespace linattn::cuda {

#ifdef LINATTN_CUDA
// writes o, ht (when not null) from q, k, v, g, h0
void gla_forward(const scan::Mixer<float>& m);
// dq, dk, dv, dg, dh0 += from q, k, v, g, h0, dO, dht
void gla_backward(const scan::Mixer<float>& m);
#else
inline void gla_forward(const scan::Mixer<float>&) { LINATTN_NO_CUDA(); }
inline void gla_backward(const scan::Mixer<float>&) { LINATTN_NO_CUDA(); }
#endif

}  // namespace linattn::cuda
